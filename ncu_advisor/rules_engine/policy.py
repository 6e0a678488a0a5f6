"""Turn rule findings into advice the user can act on, given whose kernel it is.

Runs after the rules: a finding about a library kernel's internals (a cuBLAS GEMM's occupancy,
the bank conflicts of CUB's radix sort) is demoted to ``info`` with the reason, unless the
caller can do something about its category (a precision mode, a tensor layout, a compiler
fusion), in which case the fix is replaced by that caller advice. Launches too short to matter
on their own are capped at ``low``, and so is a kernel finding whose kernel (every launch of
the same kernel with the same finding) holds too little of the run's time to be worth a
medium/high place: severity follows the time at stake (``../shared/DIAGNOSIS.md``, step 1).
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from ..derive.limiter import SHORT_LAUNCH_NS
from ..derive.origin import UNKNOWN, OriginTable
from .findings import Finding, cap_severity

# Categories whose findings stay as they are for library kernels (they are about placement,
# not about the library's code).
_ALWAYS_KEPT = {"roofline"}
# A kernel finding over less than this share of the run (its kernel's launches with the same
# finding together) is capped at low: fixing it cannot save more than that.
MIN_STAKE_PCT = 1.0
# A launch under this share of the run, and under SMALL_INSTANCE of its kernel's largest launch
# with the same finding, is a small instance of a problem whose weight lies elsewhere (a BFS
# level of 40 us beside levels of 36 ms): capped at low on its own.
MIN_LAUNCH_PCT = 0.1
SMALL_INSTANCE = 0.05


def apply_policy(findings: list[Finding], launches: pd.DataFrame, table: OriginTable,
                 time_share_pct: pd.Series | None = None) -> list[Finding]:
    """Adjust kernel findings for library origin, short launches and the time at stake.

    In place; returned. ``time_share_pct``: each launch's share of the run (quantities).
    """
    # One dict per launch (a .loc row per finding was most of this step's time).
    cols = [c for c in ("origin", "origin_label", "origin_library", "role", "duration_ns",
                        "name") if c in launches]
    by_launch = dict(zip(launches["launch"].tolist(),
                         launches[cols].to_dict("records"), strict=True))
    for f in findings:
        if f.launch is None:
            _for_application_finding(f, by_launch, table)
            continue
        row = by_launch.get(f.launch)
        if row is None:
            continue
        f.origin = row["origin"]
        if bool(row["origin_library"]) and f.category not in _ALWAYS_KEPT:
            _for_library_kernel(f, row, table)
        elif (row["origin"] == UNKNOWN.id and f.category not in _ALWAYS_KEPT
              and f.severity in ("high", "medium")):
            f.severity = cap_severity(f.severity, "low")
            f.note = _join(f.note, _UNKNOWN_NOTE)
        duration = row["duration_ns"]
        if not pd.isna(duration) and duration < SHORT_LAUNCH_NS and f.severity in ("high",
                                                                                   "medium"):
            f.severity = cap_severity(f.severity, "low")
            f.note = _join(f.note, f"a {duration / 1e3:.1f} us launch: launch overhead "
                                   "dominates, so its own inefficiency costs little")
    if time_share_pct is not None and "name" in launches:
        _cap_by_stake(findings, by_launch, time_share_pct)
    return findings


def _cap_by_stake(findings: list[Finding], by_launch: dict[int, dict],
                  share: pd.Series) -> None:
    """Cap medium/high kernel findings whose kernel holds under MIN_STAKE_PCT of the run."""
    counted = [f for f in findings if f.launch is not None and f.severity in ("high", "medium")
               and f.category not in _ALWAYS_KEPT]
    share_of = share.to_dict()  # a Series lookup per finding is slow on large runs

    def key(f: Finding) -> tuple[str, str]:  # the same finding on the same kernel
        return f.rule, by_launch.get(f.launch, {}).get("name", "")

    stake: dict[tuple[str, str], float] = {}
    largest: dict[tuple[str, str], float] = {}
    for f in counted:
        mine = float(share_of.get(f.launch, float("nan")))
        stake[key(f)] = stake.get(key(f), 0.0) + mine
        largest[key(f)] = max(largest.get(key(f), 0.0), mine)
    for f in counted:
        at_stake, mine = stake[key(f)], float(share_of.get(f.launch, float("nan")))
        if at_stake < MIN_STAKE_PCT:  # NaN (unknown durations) never caps
            f.severity = cap_severity(f.severity, "low")
            f.note = _join(f.note, f"this kernel holds {at_stake:.2f}% of the run's GPU time: "
                                   "too little at stake for more than low")
        elif mine < MIN_LAUNCH_PCT and mine < SMALL_INSTANCE * largest[key(f)]:
            f.severity = cap_severity(f.severity, "low")
            f.note = _join(f.note, f"this launch holds {mine:.3f}% of the run's GPU time: the "
                                   "time at stake is in this kernel's larger launches")


_UNKNOWN_NOTE = ("whose code this is is not known (a namespaced kernel of no library in the "
                 "origins table, no source lines): capped at low. If it is yours, profile a "
                 "-lineinfo build with source counters; if it is a library's, change the call")


@lru_cache(maxsize=1024)
def _nothing_to_change(label: str) -> str:
    return (f"Nothing to change at the call site: this is {label}'s code. Look at the "
            "kernels you write, or at how this one is called (shapes, precision, layout).")


def _for_library_kernel(f: Finding, row: dict, table: OriginTable) -> None:
    label = row["origin_label"]
    # Advice for one rule (a reduction's strided loads, not its few stores) before the
    # category's.
    roles, names = [row["role"]], [str(row.get("name", ""))]
    advice = table.advice_for(f.rule, roles, names) or table.advice_for(f.category, roles, names)
    if advice is not None:
        f.advice = advice.text
        f.category = advice.category or f.category
        if advice.severity_cap:
            f.severity = cap_severity(f.severity, advice.severity_cap)
        f.note = _join(f.note, f"{label} kernel: advice is for the caller")
        return
    f.severity = "info"
    f.estimated_saving_ns = None
    f.estimated_speedup_pct = None
    f.note = _join(f.note, f"{label} kernel: its {f.category} is the library's own design, "
                           "not something the caller can change")
    f.advice = _nothing_to_change(label)


def _for_application_finding(f: Finding, by_launch: dict[int, dict],
                             table: OriginTable) -> None:
    """Give a finding over several library launches (a fusion chain) its caller advice."""
    rows = [by_launch[i] for i in f.launch_ids if i in by_launch]
    if not rows or not all(r["origin_library"] for r in rows):
        return
    origins = list(dict.fromkeys(r["origin"] for r in rows))
    f.origin = origins[0] if len(origins) == 1 else None
    advice = table.advice_for(f.category, [r["role"] for r in rows],
                              [str(r.get("name", "")) for r in rows])
    if advice is not None:
        f.advice = advice.text
        labels = ", ".join(dict.fromkeys(r["origin_label"] for r in rows))
        f.note = _join(f.note, f"{labels} kernels: advice is for the caller")


@lru_cache(maxsize=4096)  # one note object per distinct text, not one per finding
def _join(a: str | None, b: str) -> str:
    return b if not a else f"{a}; {b}"
