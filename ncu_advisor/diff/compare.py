"""Compare two runs: pair their launches, say what changed, and gate on it.

``diff_runs(before, after)`` takes two :class:`~ncu_advisor.analysis.result.Analysis` results (one
run each: a file, or the raw and details exports of one capture read together) and returns a
:class:`RunDiff`: the launches paired across the runs, per-pair time and quantity deltas,
findings resolved, new and kept, and the noise band each change is judged against.
``evaluate_gates`` turns it into pass/fail for CI.

Pairing (``pair_launches``) works per lane: launches of one process, NVTX range and stream
(processes and streams by order of first appearance, so renumbered streams still line up).
Within a lane, in order of preference:

1. ``exact``: same kernel name, grid and block, aligned in order (repeated launches of one
   kernel pair in order), as ``difflib`` aligns lines;
2. ``reshaped``: same kernel name, another grid or block;
3. ``renamed``: another name but the same role (GEMM, convolution, reduction, ...) or a
   similar name (shared name words), aligned in order: a library that picks another kernel
   after the change (cuBLAS's FFMA GEMM becomes a TF32 one, a Triton autotune picks another
   config);
4. ``position``: what is left between two pairs, when both runs have the same number of
   launches there and their roles do not contradict each other.

Launches no lane could pair are pooled across lanes and paired again in the same way (a kernel
that moved to another NVTX range or stream). What is still unpaired is ``new`` or ``gone``.

Noise (documented in the README): two captures of the same program differ a little. A pair's
change is inside the noise when ``|after - before|`` is at most its band: ``noise_pct`` percent of
its time, but at least ``noise_floor_ns`` (short kernels jitter by a fixed few hundred ns). The
whole run's band combines the kernels' bands as independent errors (root of the sum of squares).
Given repeated captures of a side, the bands come from what the repeats show instead:
``NOISE_MARGIN`` times the largest difference seen between repeats, per kernel and for the total.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..analysis.result import Analysis
from ..derive.quantities import label_of, unit_of
from ..errors import NcuAdviseError
from ..json_text import strict
from ..rules_engine.findings import SEVERITY_RANK, Finding
from .thresholds import (
    DEFAULT_MIN_SHARE_PCT,
    DEFAULT_NOISE_FLOOR_NS,
    DEFAULT_NOISE_PCT,
    NOISE_MARGIN,
    RENAME_THRESHOLD,
)

SCHEMA_VERSION = 1
# Per-pair quantities whose change is reported (names from derive/quantities.py).
DIFF_QUANTITIES = (
    "dram_bytes", "l2_bytes", "dram_bandwidth", "sm_pct", "mem_pct",
    "achieved_occupancy_pct", "theoretical_occupancy_pct", "registers_per_thread",
    "fma_pipe_pct", "tensor_pipe_pct", "lsu_pipe_pct", "issue_active",
    "flops_fp32", "flops_tensor",
)
MATCH_KINDS = ("exact", "reshaped", "renamed", "position")
# Kernel roles, from words in the demangled name; the first pattern that matches wins.
ROLES = (
    ("attention", r"flash|fmha|attention|sdpa"),
    ("conv", r"conv|implicit_gemm|winograd|fprop|dgrad|wgrad"),
    ("gemm", r"gemm|gemv|matmul|xmma|cutlass|cublas|_mma|wgmma"),
    ("softmax", r"softmax"),
    ("norm", r"norm"),
    ("sort", r"sort|radix"),
    ("scan", r"scan|cumsum|prefix"),
    ("fft", r"fft"),
    ("random", r"curand|philox|random|normal_kernel|uniform_kernel"),
    ("histogram", r"hist"),
    ("reduce", r"reduc|_sum|_mean|argmax|argmin"),
    ("copy", r"copy|transpose|memcpy|memset|cat_"),
    ("elementwise", r"elementwise|vectoriz|pointwise|axpy"),
)
_ROLE_RES = tuple((role, re.compile(pat)) for role, pat in ROLES)
# Words that say nothing about what a kernel does.
_STOP_WORDS = frozenset({"void", "kernel", "at", "native", "detail", "impl", "const", "unsigned",
                         "int", "float", "char", "std", "array", "lambda", "instance",
                         "operator", "unnamed", "anonymous", "namespace", "long", "bool"})


# ---------------------------------------------------------------------------------------------
# Pairing


@dataclass
class Pair:
    """Two launches paired across the runs (one side None for a new or gone launch)."""

    before: int | None
    after: int | None
    match: str  # exact, reshaped, renamed, position, new, gone


@dataclass
class _Launch:
    launch: int
    name: str
    key: tuple
    role: str | None
    words: frozenset[str]


def kernel_role(name: str) -> str | None:
    """Return the role of a kernel from its name (``gemm``, ``conv``, ``reduce``, ...), or None."""
    low = name.lower()
    for role, pattern in _ROLE_RES:
        if pattern.search(low):
            return role
    return None


def _words(name: str) -> frozenset[str]:
    # Letters only: tile sizes and architecture numbers change between variants of one kernel.
    words = re.split(r"[^a-z]+", name.lower())
    return frozenset(w for w in words if len(w) >= 2 and w not in _STOP_WORDS)


def similarity(a: _Launch, b: _Launch) -> float:
    """How alike two launches with different names are, 0 (unrelated) to 1.

    Name words shared (Jaccard); the same known role adds half the scale; two known roles that
    differ rule a pair out.
    """
    if a.role and b.role and a.role != b.role:
        return 0.0
    union = a.words | b.words
    jaccard = len(a.words & b.words) / len(union) if union else 0.0
    if a.role and a.role == b.role:
        return 0.5 + 0.5 * jaccard
    return jaccard


def _records(launches: pd.DataFrame) -> dict[tuple, list[_Launch]]:
    """Launches grouped by lane (process, NVTX range, stream), each lane in launch order."""
    frame = launches.sort_values("launch")
    process = frame["process_id"].fillna(-1)
    proc_order = {p: i for i, p in enumerate(dict.fromkeys(process))}
    lanes: dict[tuple, list[_Launch]] = {}
    streams: dict[int, dict] = {}
    for row, proc in zip(frame.itertuples(index=False), process, strict=True):
        p = proc_order[proc]
        stream = -1 if pd.isna(row.stream) else row.stream
        order = streams.setdefault(p, {})
        s = order.setdefault(stream, len(order))
        nvtx = "" if pd.isna(row.nvtx) else str(row.nvtx)
        shape = tuple(None if pd.isna(v) else int(v) for v in (
            row.grid_x, row.grid_y, row.grid_z, row.block_x, row.block_y, row.block_z))
        name = str(row.name)
        short = str(row.short_name) if not pd.isna(row.short_name) else name
        lanes.setdefault((p, nvtx, s), []).append(_Launch(
            launch=int(row.launch), name=name, key=(name, shape), role=kernel_role(name),
            words=_words(short)))
    return lanes


def _blocks(b: Sequence, a: Sequence, key) -> list[tuple[int, int, int]]:
    """Matching blocks (i, j, size) of two sequences under ``key``, in order (difflib)."""
    matcher = difflib.SequenceMatcher(None, [key(x) for x in b], [key(x) for x in a],
                                      autojunk=False)
    return matcher.get_matching_blocks()


def _gaps(b: Sequence, a: Sequence, blocks) -> list[tuple[slice, slice]]:
    """The unmatched stretches between matching blocks."""
    gaps, i, j = [], 0, 0
    for bi, aj, size in blocks:
        if bi > i or aj > j:
            gaps.append((slice(i, bi), slice(j, aj)))
        i, j = bi + size, aj + size
    return gaps


def _align_renamed(b: list[_Launch], a: list[_Launch]) -> list[tuple[int, int]]:
    """Order-preserving pairs of similar launches maximizing total similarity (DP)."""
    n, m = len(b), len(a)
    score = np.zeros((n + 1, m + 1))
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            s = similarity(b[i], a[j])
            best = max(score[i + 1, j], score[i, j + 1])
            if s >= RENAME_THRESHOLD:
                best = max(best, s + score[i + 1, j + 1])
            score[i, j] = best
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        s = similarity(b[i], a[j])
        if s >= RENAME_THRESHOLD and math.isclose(score[i, j], s + score[i + 1, j + 1]):
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif score[i, j] == score[i + 1, j]:
            i += 1
        else:
            j += 1
    return pairs


def _align(b: list[_Launch], a: list[_Launch]) -> list[Pair]:
    """Pair two launch sequences; unpaired launches are left out."""
    pairs: list[Pair] = []
    exact = _blocks(b, a, lambda x: x.key)
    for bi, aj, size in exact:
        pairs.extend(Pair(b[bi + k].launch, a[aj + k].launch, "exact") for k in range(size))
    for bs, as_ in _gaps(b, a, exact):
        gb, ga = b[bs], a[as_]
        same_name = _blocks(gb, ga, lambda x: x.name)
        for bi, aj, size in same_name:
            pairs.extend(Pair(gb[bi + k].launch, ga[aj + k].launch, "reshaped")
                         for k in range(size))
        for bs2, as2 in _gaps(gb, ga, same_name):
            rb, ra = gb[bs2], ga[as2]
            renamed = _align_renamed(rb, ra)
            pairs.extend(Pair(rb[i].launch, ra[j].launch, "renamed") for i, j in renamed)
            # What is left between two renamed pairs, in equal numbers: pair by position.
            anchors = [(i, j, 1) for i, j in renamed] + [(len(rb), len(ra), 0)]
            for bs3, as3 in _gaps(rb, ra, anchors):
                pb, pa = rb[bs3], ra[as3]
                if len(pb) == len(pa) and all(
                        not (x.role and y.role and x.role != y.role) for x, y in zip(pb, pa,
                                                                                     strict=True)):
                    pairs.extend(Pair(x.launch, y.launch, "position")
                                 for x, y in zip(pb, pa, strict=True))
    return pairs


def pair_launches(before: pd.DataFrame, after: pd.DataFrame) -> list[Pair]:
    """Pair the launches of two runs (see the module docstring for how).

    Args:
        before: the ``launches`` table of the first run.
        after: the ``launches`` table of the second run.

    Returns:
        Every launch of both runs exactly once: paired, ``gone`` (before only) or ``new``
        (after only), in the order of the before run with new launches after their
        predecessor.

    """
    lanes_b, lanes_a = _records(before), _records(after)
    pairs: list[Pair] = []
    for lane, seq_b in lanes_b.items():
        if lane in lanes_a:
            pairs.extend(_align(seq_b, lanes_a[lane]))
    done_b = {p.before for p in pairs}
    done_a = {p.after for p in pairs}
    # Second pass: launches that moved to another lane, pooled in launch order.
    left_b = sorted((x for seq in lanes_b.values() for x in seq if x.launch not in done_b),
                    key=lambda x: x.launch)
    left_a = sorted((x for seq in lanes_a.values() for x in seq if x.launch not in done_a),
                    key=lambda x: x.launch)
    pairs.extend(_align(left_b, left_a))
    done_b = {p.before for p in pairs}
    done_a = {p.after for p in pairs}
    pairs.extend(Pair(x.launch, None, "gone") for x in left_b if x.launch not in done_b)
    pairs.extend(Pair(None, x.launch, "new") for x in left_a if x.launch not in done_a)
    return _in_order(pairs)


def _in_order(pairs: list[Pair]) -> list[Pair]:
    """Sort pairs by the before launch; a new launch follows the pair before it in the after run."""
    by_after = sorted(pairs, key=lambda p: (p.after is None, p.after if p.after is not None else 0))
    rank: dict[int, float] = {}
    last = -1.0
    for p in by_after:
        if p.before is not None:
            last = float(p.before)
        elif p.after is not None:
            rank[p.after] = last + 0.5
    return sorted(pairs, key=lambda p: (float(p.before) if p.before is not None
                                        else rank.get(p.after, math.inf),
                                        p.after if p.after is not None else -1))


# ---------------------------------------------------------------------------------------------
# Noise


@dataclass
class NoiseModel:
    """How large a change must be to count (JSON field ``noise``).

    Attributes:
        method: ``default`` (``kernel_pct`` and ``floor_ns``) or ``repeats`` (derived from
            repeated captures).
        kernel_pct: the per-kernel band in percent of its time, where no repeat says otherwise.
        floor_ns: the smallest per-kernel band.
        kernel_pct_by_launch: per side (``before``/``after``), launch -> band in percent derived
            from repeats.
        total_pct: the whole run's band in percent; None means the root-sum-square of the
            kernel bands.
        observed: what the repeats showed (largest per-kernel and total differences).

    """

    method: str = "default"
    kernel_pct: float = DEFAULT_NOISE_PCT
    floor_ns: float = DEFAULT_NOISE_FLOOR_NS
    kernel_pct_by_launch: dict[str, dict[int, float]] = field(default_factory=dict)
    total_pct: float | None = None
    observed: dict = field(default_factory=dict)

    def band_ns(self, before_launch: int | None, after_launch: int | None,
                before_ns: float) -> float:
        """The band of one pair in ns (judged against the before time)."""
        pcts = [self.kernel_pct_by_launch.get(side, {}).get(launch)
                for side, launch in (("before", before_launch), ("after", after_launch))]
        derived = [p for p in pcts if p is not None]
        pct = max(derived) if derived else self.kernel_pct
        return max(pct / 100.0 * before_ns, self.floor_ns)


def _times(analysis: Analysis) -> pd.Series:
    """GPU time of each launch (invocations counted), indexed by launch."""
    launches = analysis.report.launches.set_index("launch")
    return (launches["duration_ns"] * launches["invocations"]).astype("float64")


def repeat_noise(primary: Analysis, repeats: Sequence[Analysis]) -> tuple[dict[int, float],
                                                                         float, dict]:
    """Noise seen between captures of one program.

    Args:
        primary: the run the diff reports.
        repeats: other captures of the same program.

    Returns:
        Per primary launch the largest relative difference seen (percent, times
        ``NOISE_MARGIN``), the same for the total, and the raw observations.

    """
    times = _times(primary)
    total = float(np.nansum(times))
    per_launch: dict[int, float] = {}
    worst_kernel, worst_total = 0.0, 0.0
    for rep in repeats:
        rep_times = _times(rep)
        for p in pair_launches(primary.report.launches, rep.report.launches):
            if p.before is None or p.after is None:
                continue
            t0, t1 = times.get(p.before), rep_times.get(p.after)
            if t0 is None or t1 is None or not (t0 > 0) or pd.isna(t1):
                continue
            rel = abs(t1 - t0) / t0 * 100.0
            per_launch[p.before] = max(per_launch.get(p.before, 0.0), rel * NOISE_MARGIN)
            worst_kernel = max(worst_kernel, rel)
        rep_total = float(np.nansum(rep_times))
        if total > 0:
            worst_total = max(worst_total, abs(rep_total - total) / total * 100.0)
    return per_launch, worst_total * NOISE_MARGIN, {
        "repeats": len(repeats), "max_kernel_change_pct": worst_kernel,
        "total_change_pct": worst_total}


# ---------------------------------------------------------------------------------------------
# The diff


@dataclass
class RunDiff:
    """What changed between two runs (JSON: :meth:`to_dict`)."""

    before: Analysis
    after: Analysis
    pairs: list[Pair]
    noise: NoiseModel
    findings: dict[str, list[dict]]
    before_repeats: list[Analysis] = field(default_factory=list)
    after_repeats: list[Analysis] = field(default_factory=list)
    not_comparable: list[str] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        """Whether the runs were captured alike (:func:`comparability`)."""
        return not self.not_comparable

    @property
    def before_ns(self) -> float:
        """Total GPU time of the before run."""
        return self.before.total_time_ns

    @property
    def after_ns(self) -> float:
        """Total GPU time of the after run."""
        return self.after.total_time_ns

    @property
    def speedup(self) -> float | None:
        """Before total over after total (above 1: the after run is faster)."""
        return self.before_ns / self.after_ns if self.after_ns > 0 else None

    @property
    def total_band_pct(self) -> float:
        """The whole run's noise band in percent of the before total."""
        if self.noise.total_pct is not None:
            return self.noise.total_pct
        times = _times(self.before)
        # A launch without a duration has no band: a NaN one made every change, 0% too,
        # fall outside the noise.
        bands = [self.noise.band_ns(p.before, p.after, float(times.get(p.before)))
                 for p in self.pairs if p.before is not None
                 and math.isfinite(float(times.get(p.before, math.nan)))]
        total = self.before_ns
        return 100.0 * math.sqrt(sum(b * b for b in bands)) / total if total > 0 else 0.0

    def pair_rows(self) -> list[dict]:
        """One record per pair: times, speedup, noise verdict, quantity deltas (JSON form)."""
        tb, ta = _times(self.before), _times(self.after)
        total_b, total_a = self.before_ns, self.after_ns
        lb = self.before.report.launches.set_index("launch")
        la = self.after.report.launches.set_index("launch")
        rows = []
        for p in self.pairs:
            b_ns = _value(tb, p.before)
            a_ns = _value(ta, p.after)
            row = {
                "before": _kernel_ref(lb, p.before), "after": _kernel_ref(la, p.after),
                "match": p.match, "before_ns": b_ns, "after_ns": a_ns,
                "delta_ns": (a_ns or 0.0) - (b_ns or 0.0)
                if (b_ns is not None or a_ns is not None) else None,
                "speedup": b_ns / a_ns if b_ns and a_ns else None,
                "change_pct": 100.0 * (a_ns - b_ns) / b_ns if b_ns and a_ns is not None
                else None,
                "share_before": b_ns / total_b if b_ns is not None and total_b else None,
                "share_after": a_ns / total_a if a_ns is not None and total_a else None,
            }
            if p.before is not None and p.after is not None and b_ns is not None \
                    and a_ns is not None:
                band = self.noise.band_ns(p.before, p.after, b_ns)
                row["noise_ns"] = band
                row["within_noise"] = abs(a_ns - b_ns) <= band
                row["verdict"] = ("noise" if row["within_noise"]
                                  else "faster" if a_ns < b_ns else "slower")
            else:
                row["noise_ns"], row["within_noise"] = None, None
                row["verdict"] = p.match if p.match in ("new", "gone") else "unknown"
            row["bound"] = {"before": _bound(self.before, p.before),
                            "after": _bound(self.after, p.after)}
            row["roofline"] = {"before": _roof_point(self.before, p.before),
                               "after": _roof_point(self.after, p.after)}
            row["quantities"] = _quantity_deltas(self.before, p.before, self.after, p.after)
            rows.append(strict(row))
        return rows

    def to_dict(self) -> dict:
        """Return the diff's JSON form (schema_version 1; see docs/json-contract.md)."""
        total_b, total_a = self.before_ns, self.after_ns
        change = 100.0 * (total_a - total_b) / total_b if total_b > 0 else None
        band = self.total_band_pct
        counts = {k: sum(1 for p in self.pairs if p.match == k)
                  for k in (*MATCH_KINDS, "new", "gone")}
        return strict({
            "schema_version": SCHEMA_VERSION,
            "kind": "diff",
            "before": _side(self.before, self.before_repeats),
            "after": _side(self.after, self.after_repeats),
            "speedup": self.speedup,
            "delta_ns": total_a - total_b,
            "change_pct": change,
            "within_noise": abs(change) <= band if change is not None else None,
            "noise": {
                "method": self.noise.method, "kernel_pct": self.noise.kernel_pct,
                "floor_ns": self.noise.floor_ns, "total_pct": band,
                "observed": self.noise.observed,
            },
            "comparable": self.comparable,
            "not_comparable": self.not_comparable,
            "match_counts": counts,
            "roofs": _roofs(self.before, self.after),
            "pairs": self.pair_rows(),
            "findings": self.findings,
        })


def _value(times: pd.Series, launch: int | None) -> float | None:
    if launch is None:
        return None
    v = times.get(launch)
    return None if v is None or pd.isna(v) else float(v)


def _kernel_ref(launches: pd.DataFrame, launch: int | None) -> dict | None:
    if launch is None:
        return None
    row = launches.loc[launch]
    dims = [None if pd.isna(v) else int(v) for v in (
        row.grid_x, row.grid_y, row.grid_z, row.block_x, row.block_y, row.block_z)]
    return {"id": None if pd.isna(row["id"]) else int(row["id"]), "launch": int(launch),
            "name": row["name"], "short_name": row["short_name"],
            "grid": dims[:3], "block": dims[3:],
            "nvtx": None if pd.isna(row["nvtx"]) else row["nvtx"],
            "invocations": int(row["invocations"])}


def _bound(analysis: Analysis, launch: int | None) -> str | None:
    return None if launch is None else analysis.rooflines[launch].bound


def _roof_point(analysis: Analysis, launch: int | None) -> dict | None:
    """Where a launch sits on the roofline (DRAM intensity, achieved FLOP/s)."""
    if launch is None:
        return None
    r = analysis.rooflines[launch]
    return {"arithmetic_intensity": r.arithmetic_intensity, "achieved_flops": r.achieved_flops,
            "achieved_bandwidth": r.achieved_bandwidth, "bound": r.bound,
            "precision": r.precision}


def _roofs(*runs: Analysis) -> dict:
    """The device's compute (FLOP/s by precision) and memory (byte/s by level) roofs.

    The largest value seen over both runs' launches wins, as on the report's roofline chart.
    """
    compute: dict[str, float] = {}
    memory: dict[str, float] = {}
    for run in runs:
        for r in run.rooflines.values():
            for precision, peak in (r.peaks or {}).items():
                if peak is not None and math.isfinite(peak) and peak > 0:
                    compute[precision] = max(compute.get(precision, 0.0), peak)
            for level, entry in (r.levels or {}).items():
                bw = entry.get("peak_bandwidth")
                if bw is not None and math.isfinite(bw) and bw > 0:
                    memory[level] = max(memory.get(level, 0.0), bw)
    return {"compute": compute, "memory": memory}


def _quantity_deltas(before: Analysis, lb: int | None, after: Analysis,
                     la: int | None) -> dict[str, dict]:
    """Before/after values of the quantities that matter, with their change."""
    def get(analysis: Analysis, launch: int | None, name: str) -> float | None:
        if launch is None:
            return None
        if name == "achieved_flops":
            v = analysis.rooflines[launch].achieved_flops
        elif name in analysis.quantities.columns:
            v = analysis.quantities.at[launch, name]
        else:
            return None
        return None if v is None or pd.isna(v) else float(v)

    out = {}
    for name in (*DIFF_QUANTITIES, "achieved_flops"):
        b, a = get(before, lb, name), get(after, la, name)
        if b is None and a is None:
            continue
        label = ("achieved FLOP/s, all precisions" if name == "achieved_flops"
                 else label_of(name))
        unit = "FLOP/s" if name == "achieved_flops" else unit_of(name)
        out[name] = {"before": b, "after": a, "unit": unit, "label": label,
                     "delta": a - b if a is not None and b is not None else None,
                     "change_pct": 100.0 * (a - b) / b if a is not None and b else None}
    return out


def _side(analysis: Analysis, repeats: list[Analysis]) -> dict:
    rep = analysis.report
    return {
        "sources": list(rep.sources),
        "total_ns": analysis.total_time_ns,
        "launch_count": int(rep.launches["invocations"].sum()),
        "gpu": rep.session.get("gpu"),
        "repeats": [{"sources": list(r.report.sources), "total_ns": r.total_time_ns}
                    for r in repeats],
    }


# ---------------------------------------------------------------------------------------------
# Findings across the runs


def _finding_key_launches(f: Finding) -> list[int]:
    return [f.launch] if f.launch is not None else list(f.launch_ids)


def diff_findings(before: Analysis, after: Analysis, pairs: list[Pair]) -> dict[str, list[dict]]:
    """Findings resolved, new and kept, matched by rule and paired kernel.

    A kernel finding is kept when the paired launch has a finding of the same rule; an
    application finding (fusion chains, hot spots) when a finding of the same rule names at
    least one paired launch. Entries of one rule on repeated launches of one kernel pair are
    grouped (``launches`` counts them). A kept finding whose severity rose says ``worsened``.
    """
    to_after = {p.before: p.after for p in pairs if p.before is not None and p.after is not None}
    after_by_rule: dict[str, list[Finding]] = {}
    for f in after.findings:
        after_by_rule.setdefault(f.rule, []).append(f)
    matched_after: set[int] = set()
    lb = before.report.launches.set_index("launch")
    la = after.report.launches.set_index("launch")
    groups: dict[tuple, dict] = {}

    def add(status: str, fb: Finding | None, fa: Finding | None) -> None:
        main = fa if fa is not None else fb
        kb = _names(lb, fb)
        ka = _names(la, fa)
        key = (status, main.rule, tuple(kb), tuple(ka))
        g = groups.get(key)
        if g is None:
            groups[key] = g = {
                "status": status, "rule": main.rule, "category": main.category,
                "severity": main.severity,
                "before_severity": fb.severity if fb is not None else None,
                "after_severity": fa.severity if fa is not None else None,
                "worsened": bool(fb is not None and fa is not None
                                 and SEVERITY_RANK[fa.severity] < SEVERITY_RANK[fb.severity]),
                "title": main.title,
                "kernel": (ka or kb)[0] if main.launch is not None else "application",
                "kernels": {"before": kb, "after": ka},
                "before": _finding_ref(lb, fb), "after": _finding_ref(la, fa),
                "launches": 0, "advice": main.advice, "demo": main.demo,
                "estimated_saving_ns": 0.0 if main.estimated_saving_ns is not None else None,
            }
        g["launches"] += 1
        if main.estimated_saving_ns is not None:
            g["estimated_saving_ns"] = (g["estimated_saving_ns"] or 0.0) + main.estimated_saving_ns
        if SEVERITY_RANK[main.severity] < SEVERITY_RANK[g["severity"]]:
            g["severity"], g["title"] = main.severity, main.title

    for fb in before.findings:
        targets = {to_after.get(x) for x in _finding_key_launches(fb)} - {None}
        partner = None
        for fa in after_by_rule.get(fb.rule, []):
            if id(fa) in matched_after or (fa.launch is None) != (fb.launch is None):
                continue
            launches = set(_finding_key_launches(fa))
            # An application finding about no launch at all matches its rule's counterpart.
            if targets & launches or (fb.launch is None and not targets and not launches):
                partner = fa
                break
        if partner is None:
            add("resolved", fb, None)
        else:
            matched_after.add(id(partner))
            add("kept", fb, partner)
    for fa in after.findings:
        if id(fa) not in matched_after:
            add("new", None, fa)
    out: dict[str, list[dict]] = {"resolved": [], "new": [], "kept": []}
    for g in groups.values():
        out[g["status"]].append(g)
    for items in out.values():
        items.sort(key=lambda g: (SEVERITY_RANK[g["severity"]],
                                  -(g["estimated_saving_ns"] or 0.0), g["rule"]))
    return out


def _names(launches: pd.DataFrame, f: Finding | None) -> list[str]:
    if f is None:
        return []
    return list(dict.fromkeys(str(launches.loc[x, "short_name"])
                              for x in _finding_key_launches(f) if x in launches.index))


def _finding_ref(launches: pd.DataFrame, f: Finding | None) -> dict | None:
    if f is None:
        return None
    ids = [int(launches.loc[x, "id"]) for x in _finding_key_launches(f)
           if x in launches.index and not pd.isna(launches.loc[x, "id"])]
    return {"ids": list(dict.fromkeys(ids)), "launches": _finding_key_launches(f),
            "severity": f.severity, "title": f.title}


# ---------------------------------------------------------------------------------------------
# Comparability

# Capture facts two runs must share for their times to compare (session keys, as read).
COMPARED_FACTS = (
    ("gpu", "GPU"), ("cc", "compute capability"), ("ncu_version", "ncu version"),
    ("clock_control", "clock control"), ("cache_control", "cache control"),
    ("section_set", "section set"),
)


def _fact(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, list | tuple):
        return ", ".join(sorted(map(str, value)))
    text = str(value).strip()
    return text or None


def _sections(analysis: Analysis) -> set[str]:
    sections = analysis.report.metrics["section"]
    return {str(x) for x in pd.unique(sections.dropna().astype(str)) if x and x != "nan"}


def comparability(before: Analysis, after: Analysis) -> list[str]:
    """Why two runs' times do not compare (empty when they do, as far as the inputs say).

    Different GPUs or compute capabilities, ncu versions, clock or cache control, or section
    sets measure differently (a locked clock or a flushed cache alone moves a kernel by tens
    of percent); a fact one side does not record is not held against it.
    """
    reasons = []
    for key, what in COMPARED_FACTS:
        b, a = _fact(before.report.session.get(key)), _fact(after.report.session.get(key))
        if b is not None and a is not None and b != a:
            reasons.append(f"{what} differs ({b} before, {a} after)")
    sb, sa = _sections(before), _sections(after)
    if sb and sa and sb != sa:
        only = [f"{len(x)} only {side} ({', '.join(sorted(x)[:2])}"
                f"{', ...' if len(x) > 2 else ''})"
                for side, x in (("before", sb - sa), ("after", sa - sb)) if x]
        reasons.append("sections differ: " + "; ".join(only))
    return reasons


# ---------------------------------------------------------------------------------------------
# Entry points


def diff_runs(before: Analysis, after: Analysis, noise_pct: float | None = None,
              noise_floor_ns: float = DEFAULT_NOISE_FLOOR_NS,
              before_repeats: Sequence[Analysis] = (),
              after_repeats: Sequence[Analysis] = ()) -> RunDiff:
    """Compare two runs.

    Args:
        before: the baseline run (any Analysis: read from files, or built by the caller).
        after: the run to judge.
        noise_pct: the per-kernel noise band in percent. Default: ``DEFAULT_NOISE_PCT``, or
            when repeats are given the band they show (an explicit value is then a minimum).
        noise_floor_ns: the smallest per-kernel band in ns.
        before_repeats: other captures of the before program, to measure its noise.
        after_repeats: the same for the after program.

    Returns:
        The :class:`RunDiff`; its ``not_comparable`` lists why the runs were not captured
        alike (:func:`comparability`), and then no speedup should be stated from it.

    Raises:
        NcuAdviseError: a negative noise band, or a run without launches.

    """
    if noise_pct is not None and not (noise_pct >= 0 and math.isfinite(noise_pct)):
        raise NcuAdviseError(f"--noise must be a percentage >= 0, got {noise_pct}")
    if not (noise_floor_ns >= 0 and math.isfinite(noise_floor_ns)):
        raise NcuAdviseError(f"noise floor must be >= 0 ns, got {noise_floor_ns}")
    for side, run in (("before", before), ("after", after)):
        if run.report.launches.empty:
            raise NcuAdviseError(f"{side} run has no launches")
    noise = NoiseModel(kernel_pct=DEFAULT_NOISE_PCT if noise_pct is None else noise_pct,
                       floor_ns=noise_floor_ns)
    if before_repeats or after_repeats:
        noise.method = "repeats"
        totals = []
        for side, primary, reps in (("before", before, before_repeats),
                                    ("after", after, after_repeats)):
            if not reps:
                continue
            per_launch, total_pct, seen = repeat_noise(primary, reps)
            if noise_pct is not None:
                per_launch = {k: max(v, noise_pct) for k, v in per_launch.items()}
            noise.kernel_pct_by_launch[side] = per_launch
            noise.observed[side] = seen
            totals.append(total_pct)
        noise.total_pct = max(totals)
        if noise_pct is not None:
            noise.total_pct = max(noise.total_pct, noise_pct)
    pairs = pair_launches(before.report.launches, after.report.launches)
    return RunDiff(before=before, after=after, pairs=pairs, noise=noise,
                   findings=diff_findings(before, after, pairs),
                   before_repeats=list(before_repeats), after_repeats=list(after_repeats),
                   not_comparable=comparability(before, after))


def _clip(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


@dataclass
class GateResult:
    """One gate's verdict."""

    gate: str
    passed: bool
    reason: str

    def to_dict(self) -> dict:
        """Return the JSON form."""
        return {"gate": self.gate, "passed": self.passed, "reason": self.reason}


def evaluate_gates(diff: dict, fail_if_slower: float | None = None,
                   fail_on_new: str | None = None,
                   min_share_pct: float = DEFAULT_MIN_SHARE_PCT) -> list[GateResult]:
    """Judge a diff (``RunDiff.to_dict()``) against the CI gates that were asked for.

    Args:
        diff: the diff's JSON form.
        fail_if_slower: fail when the whole run, or any paired kernel with at least
            ``min_share_pct`` of either run's time, is slower by more than this many percent
            beyond its noise band.
        fail_on_new: fail on a new finding of this severity or worse, or a kept one that
            worsened to it.
        min_share_pct: see ``fail_if_slower``.

    Returns:
        One result per gate asked for.

    Raises:
        NcuAdviseError: a negative percentage or an unknown severity.

    """
    results = []
    if fail_if_slower is not None:
        if not (fail_if_slower >= 0 and math.isfinite(fail_if_slower)):
            raise NcuAdviseError(f"--fail-if-slower must be a percentage >= 0, "
                                 f"got {fail_if_slower}")
        band = diff["noise"]["total_pct"] or 0.0
        change = diff["change_pct"]
        failures = []
        if change is not None and change - band > fail_if_slower:
            failures.append(f"whole run {change:+.1f}% (noise {band:.2f}%)")
        for row in diff["pairs"]:
            if row["change_pct"] is None or row["noise_ns"] is None:
                continue
            share = 100.0 * max(row["share_before"] or 0.0, row["share_after"] or 0.0)
            band_pct = 100.0 * row["noise_ns"] / row["before_ns"]
            if share >= min_share_pct and row["change_pct"] - band_pct > fail_if_slower:
                name = _clip((row["after"] or row["before"])["short_name"])
                failures.append(f"{name} {row['change_pct']:+.1f}% (noise {band_pct:.1f}%, "
                                f"{share:.1f}% of run)")
        reason = (f"slower by more than {fail_if_slower:g}% beyond noise: "
                  + "; ".join(failures[:3]) + (f"; and {len(failures) - 3} more"
                                               if len(failures) > 3 else "")
                  if failures else f"nothing slower by more than {fail_if_slower:g}% beyond noise")
        results.append(GateResult("fail-if-slower", not failures, reason))
    if fail_on_new is not None:
        level = fail_on_new.lower()
        if level not in SEVERITY_RANK:
            raise NcuAdviseError(f"--fail-on-new must be one of {', '.join(SEVERITY_RANK)}, "
                                 f"got {fail_on_new!r}")
        bad = [f for f in diff["findings"]["new"]
               if SEVERITY_RANK[f["severity"]] <= SEVERITY_RANK[level]]
        bad += [f for f in diff["findings"]["kept"] if f["worsened"]
                and SEVERITY_RANK[f["after_severity"]] <= SEVERITY_RANK[level]]
        reason = (f"{len(bad)} new finding(s) at {level} or worse: "
                  + "; ".join(f"[{f['severity']}] {f['rule']} on {_clip(f['kernel'])}"
                              for f in bad[:3]) + (f"; and {len(bad) - 3} more"
                                                   if len(bad) > 3 else "")
                  if bad else f"no new finding at {level} or worse")
        results.append(GateResult("fail-on-new", not bad, reason))
    return results
