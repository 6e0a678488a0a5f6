"""Source attribution: the CUDA lines (and SASS instruction) behind a finding.

Findings of the kinds that live on lines get the top lines of their kernel by the counter
that measures their cause, each with the share of that cause it carries:

| finding | per-instruction cause |
|---|---|
| coalescing (loads / stores) | excessive L2 sectors of global loads / stores (beyond ideal) |
| bank conflicts | excess shared wavefronts: (n-way - 1) x instructions executed, shared accesses |
| local memory | local load and store instructions executed |
| divergence | divergent branches, else idle lanes: 32 x instructions - thread instructions |
| stalls (latency-bound, achieved occupancy) | warp stall samples, with the top stall reason |

Inputs without source-level counters get a ``collect_with`` hint instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

TOP_LINES = 3
MIN_SHARE_PCT = 1.0
COLLECT_HINT = (
    "no source-level counters for this kernel: build it with -lineinfo, profile with "
    "--set full (or --section SourceCounters) and analyze the .ncu-rep, or pass "
    "`ncu --import R.ncu-rep --csv --page source --print-source cuda,sass` with the "
    "details export")


def _col(rows: pd.DataFrame, name: str) -> pd.Series:
    if name not in rows:
        return pd.Series(0.0, index=rows.index)
    return pd.to_numeric(rows[name], errors="coerce").fillna(0.0)


def _is(rows: pd.DataFrame, col: str, word: str) -> pd.Series:
    return rows[col].astype(str).str.contains(word, na=False) if col in rows else False


def _excess_sectors(access: str) -> Callable[[pd.DataFrame], pd.Series]:
    def weight(rows: pd.DataFrame) -> pd.Series:
        keep = _is(rows, "address_space", "Global") & _is(rows, "access", access)
        return _col(rows, "l2_sectors_global_excessive").where(keep, 0.0)
    return weight


def _shared_excess(rows: pd.DataFrame) -> pd.Series:
    nway = _col(rows, "shared_nway")
    excess = (nway - 1.0).clip(lower=0.0) * _col(rows, "inst_executed")
    return excess.where(_is(rows, "address_space", "Shared"), 0.0)


def _local(rows: pd.DataFrame) -> pd.Series:
    return _col(rows, "inst_executed").where(_is(rows, "address_space", "Local"), 0.0)


def _divergence(rows: pd.DataFrame) -> pd.Series:
    branches = _col(rows, "divergent_branches")
    if branches.sum() > 0:
        return branches
    idle = 32.0 * _col(rows, "inst_executed") - _col(rows, "thread_inst_executed")
    return idle.clip(lower=0.0)


def _stalls(rows: pd.DataFrame) -> pd.Series:
    return _col(rows, "samples")


@dataclass(frozen=True)
class Cause:
    """How a kind of finding is measured per instruction."""

    what: str
    weight: Callable[[pd.DataFrame], pd.Series]
    stall_reason: bool = False


# Rule id (or its category, before the dot) -> the cause measured on lines.
CAUSES: dict[str, Cause] = {
    "coalescing.global-loads": Cause("excessive L2 sectors of global loads",
                                     _excess_sectors("Load")),
    "coalescing.global-stores": Cause("excessive L2 sectors of global stores",
                                      _excess_sectors("Store")),
    "bank-conflicts": Cause("excess shared-memory wavefronts (bank conflicts)", _shared_excess),
    "local-memory": Cause("local-memory instructions executed", _local),
    "divergence": Cause("divergent branches or idle lanes", _divergence),
    "roofline.latency-bound": Cause("warp stall samples", _stalls, stall_reason=True),
    "occupancy.achieved-gap": Cause("warp stall samples", _stalls, stall_reason=True),
}


def cause_of(rule: str) -> Cause | None:
    """The line-level cause of a rule's findings (None for findings that do not live on lines)."""
    return CAUSES.get(rule) or CAUSES.get(rule.split(".")[0])


def top_lines(rows: pd.DataFrame, cause: Cause, top: int = TOP_LINES) -> list[dict]:
    """The lines carrying most of a cause in one launch's instruction rows.

    Returns entries ``{"file", "line", "share_pct", "sass"}`` (``sass``: the instruction of
    the line that carries most of it; ``stall``: the top stall reason, for stalls), largest
    share first, lines under ``MIN_SHARE_PCT`` left out; empty when the cause is zero.
    """
    if rows.empty:
        return []
    weight = cause.weight(rows)
    # An instruction listed under several lines (inlined code) counts once in the total.
    total = float(weight.groupby(rows["address"]).max().sum())
    if total <= 0:
        return []
    scored = rows.assign(_w=weight.to_numpy())
    per_line = scored.groupby(["file", "line"], sort=False)["_w"].sum()
    per_line = per_line[per_line > 0].sort_values(ascending=False)
    out = []
    for (file, line), value in per_line.head(top).items():
        share = 100.0 * float(value) / total
        if share < MIN_SHARE_PCT:
            break
        on_line = scored[(scored["file"] == file) & (scored["line"] == line)]
        best = on_line.loc[on_line["_w"].idxmax()]
        entry = {"file": str(file), "line": int(line), "share_pct": round(min(share, 100.0), 1),
                 "sass": str(best["sass"])}
        if cause.stall_reason:
            stalls = [c for c in on_line.columns if c.startswith("stall_")]
            if stalls:
                sums = on_line[stalls].apply(pd.to_numeric, errors="coerce").sum()
                if sums.max() > 0:
                    entry["stall"] = str(sums.idxmax())[len("stall_"):]
        out.append(entry)
    return out


def attribute(findings: list, source_lines: pd.DataFrame) -> None:
    """Set ``source_lines`` (or a ``collect_with`` hint) on kernel findings that live on lines."""
    by_launch = ({int(k): g for k, g in source_lines.groupby("launch")}
                 if source_lines is not None and not source_lines.empty else {})
    for f in findings:
        if f.launch is None:
            continue
        cause = cause_of(f.rule)
        if cause is None:
            continue
        rows = by_launch.get(int(f.launch))
        if rows is None:
            f.collect_with = COLLECT_HINT
            continue
        f.source_lines = top_lines(rows, cause)
        f.source_cause = cause.what


def line_table(source_lines: pd.DataFrame, launch: int) -> pd.DataFrame:
    """Per-line sums of one launch's counters (notebooks, the HTML kernel view)."""
    rows = source_lines[source_lines["launch"] == launch]
    if rows.empty:
        return rows
    numeric = [c for c in rows.columns if c not in ("launch", "function", "file", "line",
                                                     "address", "sass", "address_space",
                                                     "access")]
    sums = rows.groupby(["file", "line"])[numeric].sum(min_count=1)
    sums["instructions"] = rows.groupby(["file", "line"])["address"].nunique()
    return sums.replace({np.nan: None}).reset_index()
