"""Evaluate rules on every launch: findings, and what could not be evaluated.

Data rules are judged on all launches at once (:mod:`.conditions`); function rules
(:mod:`.functions`) look across launches. Both build findings through :mod:`.findings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..derive.quantities import routes_of
from .conditions import condition_mask, severity_levels
from .findings import (
    CONFIDENCE_STEPS,
    SEVERITY_RANK,
    Finding,
    NotEvaluated,
    NotEvaluatedList,
    cap_severity,
    collect_with,
    confidence_of,
    evidence_of,
    fill_template,
    launch_times,
    lower_confidence,
    make_finding,
    not_evaluated,
)
from .functions import FUNCTIONS
from .schema import Rule

__all__ = [
    "CONFIDENCE_STEPS", "SEVERITY_RANK", "Finding", "NotEvaluated", "NotEvaluatedList",
    "Provenance", "cap_severity",
    "collect_with", "estimate_pct", "evaluate", "evidence_of", "fill_template",
    "lower_confidence",
]


def estimate_pct(rule: Rule, row: dict[str, float]) -> float | None:
    """Apply the rule's estimate method; None when it has none or inputs are missing."""
    est = rule.estimate
    if est is None:
        return None
    q = row.get(est.quantity, np.nan) if est.quantity else np.nan
    # A target that names a quantity is read from the launch (e.g. its SM's warp slots).
    target = (row.get(est.target_quantity, np.nan) if est.target_quantity
              else est.target)
    if est.method == "shortfall":
        pct = (1.0 - q / target) * 100.0 if target else np.nan
    elif est.method == "excess":
        pct = (1.0 - target / q) * 100.0 if q else np.nan
    elif est.method == "quantity":
        pct = q
    else:
        pct = est.value
    if est.scale:
        pct = pct * row.get(est.scale, np.nan) / 100.0
    if pct is not None:
        pct = pct * est.factor
    if pct is None or np.isnan(pct):
        return None
    return float(min(max(pct, 0.0), est.cap))


@dataclass(frozen=True)
class Provenance:
    """Which quantity values ncu's rule messages stated, and which ncu rules fired where."""

    from_ncu_rule: dict[str, set[int]] = field(default_factory=dict)
    ncu_categories: dict[int, set[str]] = field(default_factory=dict)  # launch -> categories

    def source(self, rule: Rule, launch: int) -> str:
        """Where a finding of ``rule`` on ``launch`` takes its evidence from."""
        return self.sources(rule)(launch)

    def sources(self, rule: Rule) -> Callable[[int], str]:
        """:meth:`source` for one rule, its needs looked up once (``launch -> source``)."""
        stated = set().union(*(self.from_ncu_rule.get(q, ()) for q in rule.needs))

        def source(launch: int) -> str:
            if launch in stated:
                return "ncu-rule"
            if rule.category in self.ncu_categories.get(launch, ()):
                return "both"
            return "metrics"
        return source


def _unknown(name: str, quantities: pd.DataFrame, memo: dict) -> np.ndarray:
    """Where a quantity is missing for lack of a metric (one boolean per launch).

    A measured quantity is missing where it is NaN. A derived one only where it is NaN *and*
    every route to it lacks an input: a ratio over zero DRAM bytes, or the FP64 share of a
    kernel without floating-point work, is a condition that does not hold, not a metric to
    collect.
    """
    if name not in memo:
        value = (quantities[name].isna().to_numpy() if name in quantities
                 else np.ones(len(quantities), dtype=bool))
        routes = [r for r in routes_of(name) if r]
        if routes:
            value = value & np.logical_and.reduce([
                np.logical_or.reduce([_unknown(i, quantities, memo) for i in route])
                for route in routes])
        memo[name] = value
    return memo[name]


def _missing_inputs(name: str, row: int, memo: dict) -> list[str]:
    """The measured quantities behind ``name`` missing on one row (what to collect)."""
    if not memo[name][row]:
        return []
    routes = routes_of(name)
    if not routes or not routes[0]:
        return [name]
    return [m for i in routes[0] for m in _missing_inputs(i, row, memo)]  # the preferred


def _records(values: np.ndarray, rows: np.ndarray, columns: list[str]):
    """Some rows of a float table as dicts of plain floats, one row at a time."""
    for i in rows:
        yield dict(zip(columns, values[i].tolist(), strict=True))


def evaluate(rules: list[Rule], quantities: pd.DataFrame, launches: pd.DataFrame,
             provenance: Provenance | None = None,
             ) -> tuple[list[Finding], NotEvaluatedList]:
    """Evaluate every kernel-scope data rule on every launch, and every function rule.

    A launch lacking a quantity the rule needs (:attr:`Rule.needs`) gets a not-evaluated
    entry; elsewhere the condition, severity steps and estimate are judged on all launches at
    once, and findings are built only where the rule fires.
    """
    findings: list[Finding] = []
    skipped = NotEvaluatedList()
    durations = launch_times(launches)  # a saving is a share of this
    index = quantities.index.to_numpy()
    unknown: dict[str, np.ndarray] = {}  # quantity -> where it is missing, shared by all rules
    columns = quantities.columns.tolist()
    numeric = all(dtype == np.float64 for dtype in quantities.dtypes)
    table = quantities.to_numpy(dtype="float64") if numeric else None
    for rule in rules:
        if rule.function is not None:
            f, s = FUNCTIONS[rule.function](rule, quantities, launches)
            findings.extend(f)
            skipped.extend(s)
            continue
        incomplete = np.zeros(len(index), dtype=bool)
        for name in rule.needs:
            incomplete |= _unknown(name, quantities, unknown)
        fires = ~incomplete & condition_mask(rule.when, quantities)
        entry_of: dict[tuple[str, ...], NotEvaluated] = {}  # missing quantities -> entry
        for i in np.flatnonzero(incomplete):
            missing = tuple(dict.fromkeys(m for name in rule.needs
                                          for m in _missing_inputs(name, i, unknown)))
            entry = entry_of.get(missing)
            if entry is None:
                entry = entry_of[missing] = not_evaluated(rule, None, list(missing))
            skipped.add(entry, int(index[i]))
        rows = np.flatnonzero(fires)
        if not len(rows):
            continue
        levels = severity_levels(rule, quantities)[rows]  # row by row: no copy of the rows
        # Plain dicts per firing row, one at a time (iterrows built a Series per row; all
        # rows as dicts at once held ~5 KB per launch of a rule that fires everywhere).
        records = (_records(table, rows, columns) if table is not None
                   else (quantities.iloc[int(i)].to_dict() for i in rows))
        source_of = provenance.sources(rule) if provenance is not None else None
        for level, launch, values in zip(levels, index[rows].tolist(), records, strict=True):
            launch = int(launch)
            source = source_of(launch) if source_of is not None else "metrics"
            # ncu's messages round their numbers and state only what crossed its thresholds.
            confidence = confidence_of(rule, values)
            if source == "ncu-rule":
                confidence = lower_confidence(confidence)
            findings.append(make_finding(
                rule, values, severity=level, confidence=confidence, launch=launch,
                speedup_pct=estimate_pct(rule, values),
                duration_ns=durations.get(launch, np.nan), evidence_source=source))
    return findings, skipped
