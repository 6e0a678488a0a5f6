"""Nsight Compute's own rule results as typed evidence.

A details-page export (what ``ncu --csv ./app`` prints) has few raw counters but carries ncu's
rule messages, and those state the numbers our rules need: "only 4.0 of the 32 bytes
transmitted per sector are utilized", "a 32.3-way bank conflict ... 96.88% of the overall
wavefronts". The patterns live in ``data/ncu_rule_evidence.toml`` (data, not code): each named
group of a pattern is a quantity of :mod:`ncu_advisor.derive.quantities`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Extraction:
    """One pattern: the ncu rule it reads, the regex, and where ncu's speedup goes."""

    rule: str
    pattern: re.Pattern
    speedup: str | None
    per_elapsed: bool = False  # a share of elapsed cycles, for a quantity of active cycles


@dataclass(frozen=True)
class EvidenceTable:
    """The parsed data file."""

    extractions: tuple[Extraction, ...]
    # rule, section, quantity, value, and the message pattern whose absence counts (None: any
    # message of the rule)
    absent: tuple[tuple[str, str, str, float, re.Pattern | None], ...]
    categories: dict[str, str]
    categories_by_text: tuple[tuple[str, re.Pattern, str], ...]

    @property
    def quantities(self) -> tuple[str, ...]:
        """Every quantity some pattern can fill."""
        names = [g for e in self.extractions for g in e.pattern.groupindex]
        names += [e.speedup for e in self.extractions if e.speedup]
        names += [a[2] for a in self.absent]
        return tuple(dict.fromkeys(names))


@lru_cache(maxsize=1)
def evidence_table() -> EvidenceTable:
    """Load ``data/ncu_rule_evidence.toml`` once."""
    text = resources.files("ncu_advisor").joinpath("data/ncu_rule_evidence.toml").read_text()
    data = tomllib.loads(text)
    extractions = tuple(
        Extraction(e["rule"], re.compile(e["pattern"], re.DOTALL), e.get("speedup"),
                   e.get("per") == "elapsed")
        for e in data.get("extract", []))
    by_text = tuple((c["rule"], re.compile(c["pattern"]), c["category"])
                    for c in data.get("category_by_text", []))
    absent = tuple((a["rule"], a["section"], a["quantity"], float(a["value"]),
                    re.compile(a["pattern"]) if "pattern" in a else None)
                   for a in data.get("absent", []))
    return EvidenceTable(extractions, absent, dict(data.get("category", {})), by_text)


def ncu_rule_category(rule: str, description: str) -> str:
    """The checklist category an ncu rule message speaks to ("" for none)."""
    table = evidence_table()
    for name, pattern, category in table.categories_by_text:
        if name == rule and pattern.search(description or ""):
            return category
    return table.categories.get(rule, "")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # a non-numeric group (never in the shipped table) carries no value
        return np.nan


def ncu_rule_quantities(ncu_rules: pd.DataFrame, index: pd.Index,
                        metrics: pd.DataFrame | None = None) -> pd.DataFrame:
    """Quantities stated in ncu's rule messages, one row per launch of ``index``.

    The first message that states a quantity for a launch wins (ncu states each once per
    launch; the L1 and L2 variants of an access-pattern message carry the same ratio).
    ``metrics`` (the Report's long table) tells which sections were collected, for what a
    missing message says (``[[absent]]`` in the data file).
    """
    table = evidence_table()
    columns = list(table.quantities)
    out = pd.DataFrame(np.nan, index=index, columns=columns, dtype="float64")
    if ncu_rules is None or ncu_rules.empty:
        return out
    if metrics is not None:
        _fill_absent(out, table, ncu_rules, metrics)
    by_rule: dict[str, list[Extraction]] = {}
    for e in table.extractions:
        by_rule.setdefault(e.rule, []).append(e)
    rows = ncu_rules[ncu_rules["rule"].isin(list(by_rule))]
    active_share = _active_share(metrics, index) if any(
        e.per_elapsed for e in table.extractions) else {}
    for launch, rule, text, speedup in zip(rows["launch"], rows["rule"], rows["description"],
                                           rows["speedup"], strict=True):
        if launch not in out.index or not isinstance(text, str):
            continue
        for e in by_rule[rule]:
            match = e.pattern.search(text)
            if match is None:
                continue
            scale = 1.0 / active_share.get(launch, 1.0) if e.per_elapsed else 1.0
            for name, value in match.groupdict().items():
                if value is not None and np.isnan(out.at[launch, name]):
                    out.at[launch, name] = _number(value) * scale
            if e.speedup and not pd.isna(speedup) and np.isnan(out.at[launch, e.speedup]):
                out.at[launch, e.speedup] = float(speedup)
    return out


# The SM's share of active cycles: its active over its elapsed cycles, the denominator of
# ncu's `pct_of_peak_sustained_elapsed`. The details page has the elapsed cycles summed over
# the SMs (the workload-distribution section) or the IPC per elapsed and per active cycle
# (compute workload, rounded to 0.01); its SOL section's elapsed cycles are the GPC's, which
# count the launch's ramp too (a share up to 30% lower on short kernels): the last resort.
_ACTIVE = "sm__cycles_active.avg"
_CYCLE_METRICS = (_ACTIVE, "sm__cycles_elapsed.avg", "sm__cycles_elapsed.sum", "launch__sm_count",
                  "sm__inst_executed.avg.per_cycle_elapsed",
                  "sm__inst_executed.avg.per_cycle_active", "gpc__cycles_elapsed.max")


def _active_share(metrics: pd.DataFrame | None, index: pd.Index) -> dict[int, float]:
    """Each launch's SM active cycles over its elapsed cycles (where the export has them)."""
    if metrics is None or metrics.empty:
        return {}
    rows = metrics[metrics["metric"].isin(_CYCLE_METRICS)]
    if rows.empty:
        return {}
    c = rows.pivot_table(index="launch", columns="metric", values="value", aggfunc="first")
    c = c.reindex(columns=list(_CYCLE_METRICS))

    def ratio(top: pd.Series, bottom: pd.Series) -> pd.Series:
        return top / bottom.where(bottom > 0)
    share = ratio(c[_ACTIVE], c["sm__cycles_elapsed.avg"])
    share = share.fillna(ratio(c[_ACTIVE], ratio(c["sm__cycles_elapsed.sum"],
                                                 c["launch__sm_count"])))
    share = share.fillna(ratio(c["sm__inst_executed.avg.per_cycle_elapsed"],
                               c["sm__inst_executed.avg.per_cycle_active"]))
    share = share.fillna(ratio(c[_ACTIVE], c["gpc__cycles_elapsed.max"])).clip(upper=1.0)
    share = share[(share > 0) & share.index.isin(index)]
    return {int(k): float(v) for k, v in share.dropna().items()}


def _fill_absent(out: pd.DataFrame, table: EvidenceTable, ncu_rules: pd.DataFrame,
                 metrics: pd.DataFrame) -> None:
    """Where a section was collected but its rule said nothing, set the stated value.

    An entry with a pattern counts only the rule's messages that match it as speaking.
    """
    for rule, section, quantity, value, pattern in table.absent:
        collected = set(metrics.loc[metrics["section"] == section, "launch"].unique())
        said = ncu_rules[ncu_rules["rule"] == rule]
        if pattern is not None:
            said = said[said["description"].astype(str).str.contains(pattern)]
        spoke = set(said["launch"].unique())
        for launch in collected - spoke:
            if launch in out.index:
                out.at[launch, quantity] = value


def ncu_rule_categories(ncu_rules: pd.DataFrame) -> pd.DataFrame:
    """Each ncu optimization message (type OPT) with its checklist category."""
    if ncu_rules is None or ncu_rules.empty:
        return pd.DataFrame(columns=["launch", "rule", "category", "speedup"])
    opt = ncu_rules[ncu_rules["type"] == "OPT"]
    cats = [ncu_rule_category(r, d) for r, d in zip(opt["rule"], opt["description"],
                                                     strict=True)]
    return pd.DataFrame({"launch": opt["launch"].to_numpy(), "rule": opt["rule"].to_numpy(),
                         "category": cats, "speedup": opt["speedup"].to_numpy()})
