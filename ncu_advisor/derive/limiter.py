"""One limiter per launch, with its headroom: the first step of an expert's diagnosis.

``../shared/DIAGNOSIS.md``'s order: a launch of a few microseconds is bound by launch
overhead; otherwise the busiest unit names the limit when it runs at 60% of its peak or more
(a memory level, a pipe, the issue slots: Nsight Compute's own threshold for a throughput
limit); below that, a grid of fewer blocks than SMs or of less than one wave is the launch
shape (as ncu's Small Grid), else the launch is latency-bound, by too few warps or by its
dominant stall. The headroom is how far the limiting unit is from its roof (for latency, how far
the busiest unit is from its own).

The units come from whatever the export holds: per-pipe utilizations and stall reasons (raw
page, ``.ncu-rep``), or only the speed-of-light breakdown (details page, text): a form that
lacks a unit's metric cannot name it, and the limiter says which evidence it used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from .bound import LATENCY_THRESHOLD_PCT

# A launch this short is mostly launch latency and ramp-up, whatever its counters say: about
# what one launch costs, so its own inefficiency costs next to nothing and many such launches
# are a batching question, not a kernel one. The one threshold of "too short to matter alone".
SHORT_LAUNCH_NS = 5_000.0
# Below this achieved occupancy, a latency-bound launch has too few warps to hide latency.
FEW_WARPS_PCT = 25.0

# (quantity, kind, unit name); the busiest of those a launch has is its throughput limiter.
# The SOL totals come last: they name a limit only where the finer units are missing.
UNITS: tuple[tuple[str, str, str], ...] = (
    ("dram_pct", "memory", "DRAM"),
    ("l2_pct", "memory", "L2"),
    ("l1_pct", "memory", "L1/shared"),
    ("fma_pipe_pct", "pipe", "FMA pipe"),
    ("alu_pipe_pct", "pipe", "ALU pipe"),
    ("xu_pipe_pct", "pipe", "XU pipe"),
    ("fp64_pipe_pct", "pipe", "FP64 pipe"),
    ("tensor_pipe_pct", "pipe", "tensor pipe"),
    ("lsu_pipe_pct", "pipe", "LSU pipe"),
    ("issue_pct", "issue", "issue slots"),
)
SOL_UNITS: tuple[tuple[str, str, str], ...] = (
    ("mem_pct", "memory", "memory (SOL)"),
    ("sm_pct", "pipe", "compute (SOL)"),
)
# (quantity, short name for tables, what it means)
STALLS: tuple[tuple[str, str, str], ...] = (
    ("stall_long_scoreboard", "memory wait",
     "long scoreboard (waiting on L1TEX: global/local memory)"),
    ("stall_lg_throttle", "LG throttle", "LG throttle (the global/local memory queue is full)"),
    ("stall_mio_throttle", "MIO throttle",
     "MIO throttle (shared memory, special math, dynamic branches)"),
    ("stall_short_scoreboard", "short wait",
     "short scoreboard (waiting on shared memory or MUFU)"),
    ("stall_math_pipe", "pipe throttle", "math pipe throttle (one pipe oversubscribed)"),
    ("stall_branch_resolving", "branches", "branch resolving"),
    ("stall_barrier", "barrier",
     "barrier (warps waiting at __syncthreads for the rest of their block)"),
)
# A stall reason dominates when it takes this share of the cycles between two issues: Nsight
# Compute's CPIStall threshold, so the raw page names the stall exactly where the details
# page's rule message does.
DOMINANT_STALL_SHARE = 0.3
# What the limiter reads, for the metrics a lean read keeps and for the evidence it shows.
INPUTS = tuple(dict.fromkeys(
    [q for q, _, _ in UNITS if q != "issue_pct"] + [q for q, _, _ in SOL_UNITS]
    + [q for q, _, _ in STALLS] + ["issue_active", "duration_ns", "grid_size", "sm_count",
                                   "waves_per_sm", "achieved_occupancy_pct",
                                   "cycles_per_issue"]))


@dataclass(frozen=True)
class Limiter:
    """What limits one launch."""

    kind: str  # memory | pipe | issue | latency | launch-shape | launch-overhead | unknown
    unit: str  # "DRAM", "FMA pipe", "too few warps", "long scoreboard ... stalls", ...
    utilization_pct: float | None = None  # the limiting unit's share of its peak
    headroom_pct: float | None = None  # how far the launch is from that roof
    evidence: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON entry (``kernels[].limiter``)."""
        return {"kind": self.kind, "unit": self.unit,
                "utilization_pct": _round(self.utilization_pct),
                "headroom_pct": _round(self.headroom_pct),
                "evidence": {k: _round(v) for k, v in self.evidence.items()}}

    @property
    def label(self) -> str:
        """A few words for a table: ``DRAM 86%``, ``few warps``, ``launch overhead``."""
        if self.kind in ("memory", "pipe", "issue") and self.utilization_pct is not None:
            unit = {"issue slots": "issue", "memory (SOL)": "memory",
                    "compute (SOL)": "compute"}.get(self.unit, self.unit.replace(" pipe", ""))
            return f"{unit} {self.utilization_pct:.0f}%"
        if self.kind == "latency":
            shorts = {label: short for _, short, label in STALLS}
            return "few warps" if self.unit == "too few warps" else \
                shorts.get(self.unit.removesuffix(" stalls"), "latency")
        return {"launch-shape": "small grid", "launch-overhead": "launch ovh"}.get(self.kind, "?")


def _round(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 2)


def _known(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def limiter_of(q: Mapping[str, float]) -> Limiter:
    """The limiter of one launch from its quantities (a row of the quantities table)."""
    value = {name: float(q[name]) for name in INPUTS if name in q and _known(q[name])}
    if "issue_active" in value:
        value["issue_pct"] = 100.0 * value["issue_active"]
    duration = value.get("duration_ns")
    if duration is not None and duration < SHORT_LAUNCH_NS:
        return Limiter("launch-overhead", "launch overhead", None, None,
                       {"duration_ns": duration})
    fine = [(value[qn], kind, unit, qn) for qn, kind, unit in UNITS if qn in value]
    sol = [(value[qn], kind, unit, qn) for qn, kind, unit in SOL_UNITS if qn in value]
    busiest = max(fine, default=None)
    top = max(fine + sol, default=None)
    if top is None:
        return Limiter("unknown", "not measured")
    # Too small a launch, where no unit is busy (as ncu's Small Grid): fewer blocks than SMs,
    # or less than one wave of blocks.
    grid, sms, waves = value.get("grid_size"), value.get("sm_count"), value.get("waves_per_sm")
    if top[0] < LATENCY_THRESHOLD_PCT:
        if grid is not None and sms and grid < sms:
            busy = 100.0 * grid / sms
            return Limiter("launch-shape", "idle SMs", busy, 100.0 - busy,
                           {"grid_size": grid, "sm_count": sms})
        if waves is not None and 0 < waves < 1:
            return Limiter("launch-shape", "less than one wave", 100.0 * waves,
                           100.0 * (1.0 - waves), {"waves_per_sm": waves})
    if busiest is not None and busiest[0] >= LATENCY_THRESHOLD_PCT:
        pct, kind, unit, name = busiest
        return Limiter(kind, unit, pct, 100.0 - pct, {name: pct})
    if top[0] >= LATENCY_THRESHOLD_PCT:  # only the SOL totals name it (a details page)
        pct, kind, unit, name = top
        return Limiter(kind, unit, pct, 100.0 - pct, {name: pct})
    evidence = {top[3]: top[0]}
    occupancy = value.get("achieved_occupancy_pct")
    if occupancy is not None and occupancy < FEW_WARPS_PCT:
        evidence["achieved_occupancy_pct"] = occupancy
        return Limiter("latency", "too few warps", top[0], 100.0 - top[0], evidence)
    stalls = [(value[qn], qn, label) for qn, _, label in STALLS if qn in value]
    per_issue = value.get("cycles_per_issue")
    dominant = [s for s in stalls
                if per_issue is None or s[0] >= DOMINANT_STALL_SHARE * per_issue]
    if dominant:
        cycles, name, label = max(dominant)
        evidence[name] = cycles
        return Limiter("latency", f"{label} stalls", top[0], 100.0 - top[0], evidence)
    if stalls or per_issue is not None:  # the warp states were measured: no reason dominates
        return Limiter("latency", "latency (no dominant stall)", top[0], 100.0 - top[0],
                       evidence)
    return Limiter("latency", "latency (no stall breakdown in this export)", top[0],
                   100.0 - top[0], evidence)


def limiters(quantities: pd.DataFrame) -> dict[int, Limiter]:
    """Every launch's limiter, by launch number (the quantities table's index)."""
    columns = [c for c in INPUTS if c in quantities.columns]
    rows = quantities[columns].to_dict("index")
    return {int(launch): limiter_of(row) for launch, row in rows.items()}
