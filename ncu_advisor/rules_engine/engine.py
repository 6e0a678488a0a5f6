"""Evaluate rules on every launch: findings, and what could not be evaluated."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np
import pandas as pd

from ..derive.quantities import label_of, metrics_of, unit_of
from .schema import All, Any_, Comparison, Not, Rule

SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}


@dataclass
class Finding:
    """One piece of advice about one launch (or the application)."""

    rule: str
    category: str
    severity: str
    confidence: str
    title: str
    evidence: dict[str, dict]
    advice: str
    explanation: str
    estimated_speedup_pct: float | None
    estimated_saving_ns: float | None
    demo: str | None
    references: list[str] = field(default_factory=list)
    launch: int | None = None
    kernel_ids: list[int] = field(default_factory=list)
    launch_ids: list[int] = field(default_factory=list)  # application findings: launches

    def to_dict(self) -> dict:
        """Return the JSON form (contract field names)."""
        return asdict(self)


@dataclass
class NotEvaluated:
    """A rule that could not run on a launch because metrics are missing."""

    rule: str
    category: str
    missing: list[str]
    collect_with: str
    launch: int | None = None

    def to_dict(self) -> dict:
        """Return the JSON form."""
        return asdict(self)


@lru_cache(maxsize=1)
def _metric_sections() -> dict[str, tuple[str, str]]:
    path = resources.files("ncu_advisor").joinpath("data/metric_sections.csv")
    with path.open("r") as fh:
        return {row["metric"]: (row["section"], row["set"]) for row in csv.DictReader(fh)}


def collect_with(metrics: list[str]) -> str:
    """Say how to collect metrics: the ncu section (and the smallest set) or ``--metrics``."""
    table = _metric_sections()
    parts, loose = [], []
    for metric in metrics:
        if metric in table:
            section, set_name = table[metric]
            text = f"--section {section}" + (f" (in --set {set_name})" if set_name else "")
            if text not in parts:
                parts.append(text)
        else:
            loose.append(metric)
    if loose:
        parts.append("--metrics " + ",".join(loose))
    return "; ".join(parts)


_FIELD = re.compile(r"\{([a-z0-9_]+)(?::([^{}]*))?\}")


def render_text(template: str, values: dict[str, float]) -> str:
    """Fill ``{quantity:.1f}`` fields; only plain quantity names are allowed (no attributes)."""
    def sub(match: re.Match) -> str:
        name, spec = match.group(1), match.group(2) or ".3g"
        value = values.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "n/a"
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)
    return _FIELD.sub(sub, template)


def _evaluate(cond, row: dict[str, float]) -> bool:
    if isinstance(cond, All):
        return all(_evaluate(c, row) for c in cond.all)
    if isinstance(cond, Any_):
        return any(_evaluate(c, row) for c in cond.any)
    if isinstance(cond, Not):
        return not _evaluate(cond.not_, row)
    assert isinstance(cond, Comparison)
    left = row.get(cond.q, np.nan)
    rhs = getattr(cond, cond.op)
    right = (row.get(rhs, np.nan) if isinstance(rhs, str) else rhs) * cond.times
    if left is None or right is None or np.isnan(left) or np.isnan(right):
        return False  # a missing value never makes a condition true
    return {"lt": left < right, "le": left <= right, "gt": left > right, "ge": left >= right,
            "eq": left == right, "ne": left != right}[cond.op]


def _mask(cond, q: pd.DataFrame) -> np.ndarray:
    """Evaluate a condition on every launch at once (one boolean per row of ``q``)."""
    if isinstance(cond, All):
        return np.logical_and.reduce([_mask(c, q) for c in cond.all])
    if isinstance(cond, Any_):
        return np.logical_or.reduce([_mask(c, q) for c in cond.any])
    if isinstance(cond, Not):
        return ~_mask(cond.not_, q)
    nan = np.full(len(q), np.nan)
    left = q[cond.q].to_numpy(dtype=float) if cond.q in q else nan
    rhs = getattr(cond, cond.op)
    if isinstance(rhs, str):
        right = (q[rhs].to_numpy(dtype=float) if rhs in q else nan) * cond.times
    else:
        right = np.full(len(q), rhs * cond.times)
    known = ~(np.isnan(left) | np.isnan(right))  # a missing value never makes it true
    with np.errstate(invalid="ignore"):
        result = {"lt": left < right, "le": left <= right, "gt": left > right,
                  "ge": left >= right, "eq": left == right, "ne": left != right}[cond.op]
    return result & known


def estimate_pct(rule: Rule, row: dict[str, float]) -> float | None:
    """Apply the rule's estimate method; None when it has none or inputs are missing."""
    est = rule.estimate
    if est is None:
        return None
    q = row.get(est.quantity, np.nan) if est.quantity else np.nan
    if est.method == "shortfall":
        pct = (1.0 - q / est.target) * 100.0
    elif est.method == "excess":
        pct = (1.0 - est.target / q) * 100.0 if q else np.nan
    elif est.method == "quantity":
        pct = q
    else:
        pct = est.value
    if est.scale:
        pct = pct * row.get(est.scale, np.nan) / 100.0
    if pct is None or np.isnan(pct):
        return None
    return float(min(max(pct, 0.0), est.cap))


def evidence_of(names: list[str], row: dict[str, float]) -> dict[str, dict]:
    """Evidence entries: value, unit and label of each quantity present."""
    out = {}
    for name in names:
        value = row.get(name, np.nan)
        if value is None or np.isnan(value):
            continue
        out[name] = {"value": float(value), "unit": unit_of(name), "label": label_of(name)}
    return out


def _finding(rule: Rule, launch: int, row: dict[str, float], duration_ns: float) -> Finding:
    """The finding of a data rule whose condition holds on one launch."""
    severity = next(s.level for s in rule.severity if s.when is None or _evaluate(s.when, row))
    pct = estimate_pct(rule, row)
    saving = pct / 100.0 * duration_ns if pct is not None and not np.isnan(duration_ns) else None
    return Finding(
        rule=rule.id, category=rule.category, severity=severity, confidence=rule.confidence,
        title=render_text(rule.title, row), evidence=evidence_of(rule.evidence, row),
        advice=render_text(rule.fix.strip(), row),
        explanation=render_text(rule.explanation.strip(), row),
        estimated_speedup_pct=pct, estimated_saving_ns=saving, demo=rule.demo,
        references=list(rule.references), launch=launch,
    )


def _not_evaluated(rule: Rule, launch: int | None,
                   missing_quantities: list[str]) -> NotEvaluated:
    """Say which metrics a rule lacked (on one launch, or the application) and how to get them."""
    metrics = list(dict.fromkeys(m for q in missing_quantities for m in metrics_of(q)))
    return NotEvaluated(rule.id, rule.category, metrics, collect_with(metrics), launch)


def evaluate(rules: list[Rule], quantities: pd.DataFrame, launches: pd.DataFrame,
             ) -> tuple[list[Finding], list[NotEvaluated]]:
    """Evaluate every kernel-scope data rule on every launch, and every function rule.

    Conditions are evaluated on all launches at once; findings are built only where a rule
    fires, and not-evaluated entries only where its required quantities are missing.
    """
    from .functions import FUNCTIONS

    findings: list[Finding] = []
    skipped: list[NotEvaluated] = []
    durations = dict(zip(launches["launch"], launches["duration_ns"], strict=True))
    index = quantities.index.to_numpy()
    # Rows as plain dicts, built once (Series.to_dict per finding dominated large reports).
    columns, table = list(quantities.columns), quantities.to_numpy(dtype="float64")
    for rule in rules:
        if rule.function is not None:
            f, s = FUNCTIONS[rule.function](rule, quantities, launches)
            findings.extend(f)
            skipped.extend(s)
            continue
        required = quantities.reindex(columns=rule.requires).isna().to_numpy()
        incomplete = required.any(axis=1)
        fires = ~incomplete & (_mask(rule.when, quantities) if rule.when is not None
                               else np.zeros(len(index), dtype=bool))
        for i in np.flatnonzero(incomplete):
            absent = [q for q, gone in zip(rule.requires, required[i], strict=True) if gone]
            skipped.append(_not_evaluated(rule, int(index[i]), absent))
        for i in np.flatnonzero(fires):
            launch = int(index[i])
            findings.append(_finding(rule, launch, dict(zip(columns, table[i].tolist(),
                                                            strict=True)),
                                     durations.get(launch, np.nan)))
    return findings, skipped
