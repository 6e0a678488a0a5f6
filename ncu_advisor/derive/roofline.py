"""Roofline position of every launch: FLOPs by precision, bytes per memory level, peaks, bound.

Formulas follow ncu's SpeedOfLight_RooflineChart and hierarchical roofline sections:
peak FP32 FLOP/s = ``sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained`` x 2 x
``sm__cycles_elapsed.avg.per_second``; peak DRAM byte/s = ``dram__bytes.sum.peak_sustained`` x
``dram__cycles_elapsed.avg.per_second``; L2 and L1 ceilings from the ``derived__lts__lts2xbar``
and ``derived__l1tex__lsu_writeback`` helpers. When a report lacks these (basic set, details
page only), peaks come from :data:`KNOWN_GPUS`, a table of vendor datasheet numbers.

Classification (documented in the README): a kernel whose compute (SM) and memory throughput
are both below 60% of peak is ``latency``-bound (ncu's own threshold for a latency issue);
otherwise it is ``memory``-bound when memory throughput is the higher of the two, else
``compute``-bound. Arithmetic intensity against the ridge point places it on the chart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from .bound import LATENCY_THRESHOLD_PCT, bound_of

# Vendor datasheet peaks (dense, no sparsity): FP32/FP64/FP16 non-tensor FLOP/s, tensor
# FP16 FLOP/s, DRAM byte/s. Used only when the report holds no peak metrics.
KNOWN_GPUS: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"fp32": 67e12, "fp64": 34e12, "fp16": 134e12, "tensor": 989e12,
                    "dram": 4.8e12},
    "NVIDIA H100 80GB HBM3": {"fp32": 67e12, "fp64": 34e12, "fp16": 134e12, "tensor": 989e12,
                              "dram": 3.35e12},
    "NVIDIA H100 PCIe": {"fp32": 51e12, "fp64": 26e12, "fp16": 102e12, "tensor": 756e12,
                         "dram": 2.0e12},
    "NVIDIA A100-SXM4-80GB": {"fp32": 19.5e12, "fp64": 9.7e12, "fp16": 78e12, "tensor": 312e12,
                              "dram": 2.04e12},
    "NVIDIA A100-SXM4-40GB": {"fp32": 19.5e12, "fp64": 9.7e12, "fp16": 78e12, "tensor": 312e12,
                              "dram": 1.56e12},
    "NVIDIA L4": {"fp32": 30.3e12, "fp64": 0.47e12, "fp16": 30.3e12, "tensor": 121e12,
                  "dram": 0.3e12},
    "NVIDIA GeForce RTX 4090": {"fp32": 82.6e12, "fp64": 1.29e12, "fp16": 82.6e12,
                                "tensor": 165e12, "dram": 1.01e12},
    "Tesla T4": {"fp32": 8.1e12, "fp64": 0.25e12, "fp16": 16.2e12, "tensor": 65e12,
                 "dram": 0.32e12},
    "Tesla V100-SXM2-32GB": {"fp32": 15.7e12, "fp64": 7.8e12, "fp16": 31.4e12, "tensor": 125e12,
                             "dram": 0.9e12},
}

_SM_HZ = "sm__cycles_elapsed.avg.per_second"
# Per precision: (peak metric alternatives, scale); the first metric present is used.
_PEAK_METRICS = {
    "fp32": (("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",), 2.0),
    "fp64": (("sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained",), 2.0),
    # ncu's half-precision chart scales the HFMA peak by 4 (a half2 FMA is 2 x 2 operations).
    "fp16": (("sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained",), 4.0),
    # Dense FP16 tensor peak: Hopper's wgmma path, then the mma path; the plain
    # sm__ops_path_tensor_src_fp16 peak counts 2:4 sparsity (twice the dense rate).
    "tensor": (("sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained",
                "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32_sparsity_off.sum.peak_sustained"),
               1.0),
}
_LEVELS = {
    "dram": ("dram_bytes", ("dram__bytes.sum.peak_sustained",
                            "dram__cycles_elapsed.avg.per_second")),
    "l2": ("l2_bytes", ("derived__lts__lts2xbar_bytes.sum.peak_sustained",
                        "lts__cycles_elapsed.avg.per_second")),
    "l1": ("l1_bytes", ("derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained",
                        "l1tex__cycles_elapsed.avg.per_second")),
}

# The report metrics (wide columns) roofline_for reads.
ROOFLINE_METRICS = tuple(dict.fromkeys([
    _SM_HZ, *(m for alternatives, _ in _PEAK_METRICS.values() for m in alternatives),
    *(m for _, metrics in _LEVELS.values() for m in metrics)]))
# The quantities (derive/quantities.py) roofline_for reads.
ROOFLINE_QUANTITIES = ("duration_ns", "flops_fp32", "flops_fp64", "flops_fp16", "flops_tensor",
                       "flops_total", "sm_pct", "mem_pct",
                       *(bytes_q for bytes_q, _ in _LEVELS.values()))


@dataclass
class Roofline:
    """Roofline facts of one launch (JSON field ``roofline``)."""

    bound: str | None
    arithmetic_intensity: float | None
    pct_of_roof: float | None
    precision: str | None
    achieved_flops: float | None
    peak_flops: float | None
    achieved_bandwidth: float | None
    peak_bandwidth: float | None
    ridge_point: float | None
    peak_source: str | None
    flops: dict[str, float | None] = field(default_factory=dict)
    peaks: dict[str, float | None] = field(default_factory=dict)
    levels: dict[str, dict[str, float | None]] = field(default_factory=dict)
    measured_bandwidth: float | None = None
    evidence: str = ""
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Return the JSON form, NaN as null."""
        # _clean copies every dict and list: the same result as asdict, without its deepcopy.
        return _clean({f.name: getattr(self, f.name) for f in fields(self)})


def _clean(obj):
    kind = type(obj)  # exact types first (every launch's roofline is cleaned for the JSON)
    if kind is float:
        return obj if math.isfinite(obj) else None
    if kind is str or obj is None:
        return obj
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, np.floating):
        return _clean(float(obj))
    return obj


def _get(row: Mapping[str, float], name: str) -> float:
    value = row.get(name, np.nan)
    return float(value) if value is not None else np.nan


def _fmt(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def roofline_for(wide_row: Mapping[str, float], q: Mapping[str, float], gpu: str | None,
                 measured_bandwidth: float | None = None) -> Roofline:
    """Compute the roofline facts of one launch from its metrics and quantities.

    ``wide_row`` and ``q`` map names to values with ``.get`` (a row of ``Report.wide()``
    and of the quantity table, or a dict of :data:`ROOFLINE_METRICS`); absent names are
    missing values.
    """
    duration_s = _get(q, "duration_ns") * 1e-9
    flops = {p: _get(q, f"flops_{p}") for p in ("fp32", "fp64", "fp16", "tensor")}
    peaks: dict[str, float] = {}
    source = "report"
    for precision, (alternatives, scale) in _PEAK_METRICS.items():
        per_cycle = next((v for v in (_get(wide_row, m) for m in alternatives)
                          if not np.isnan(v)), np.nan)
        peaks[precision] = per_cycle * _get(wide_row, _SM_HZ) * scale
    levels = {}
    for level, (bytes_q, (peak_metric, hz_metric)) in _LEVELS.items():
        nbytes = _get(q, bytes_q)
        peak_bw = _get(wide_row, peak_metric) * _get(wide_row, hz_metric)
        levels[level] = {"bytes": nbytes,
                         "bandwidth": nbytes / duration_s if duration_s > 0 else np.nan,
                         "peak_bandwidth": peak_bw, "intensity": np.nan}
    table = KNOWN_GPUS.get(gpu or "")
    if table and all(np.isnan(v) for v in peaks.values()):
        peaks = {k: table[k] for k in ("fp32", "fp64", "fp16", "tensor")}
        levels["dram"]["peak_bandwidth"] = table["dram"]
        source = f"datasheet table ({gpu})"
    elif table and np.isnan(levels["dram"]["peak_bandwidth"]):
        levels["dram"]["peak_bandwidth"] = table["dram"]
    total_flops = _get(q, "flops_total")  # the quantity rules read (derive/quantities.py)
    for level in levels.values():
        level["intensity"] = (total_flops / level["bytes"]
                              if level["bytes"] and level["bytes"] > 0 else np.nan)
    # The precision that did the most work sets the compute roof (FP32 when none did any).
    done = {p: v for p, v in flops.items() if not np.isnan(v) and v > 0}
    precision = max(done, key=done.get) if done else ("fp32" if not np.isnan(flops["fp32"])
                                                       else None)
    peak_flops = peaks.get(precision, np.nan) if precision else np.nan
    achieved_flops = total_flops / duration_s if duration_s > 0 else np.nan
    dram = levels["dram"]
    ai = dram["intensity"]
    ridge = (peak_flops / dram["peak_bandwidth"]
             if dram["peak_bandwidth"] and dram["peak_bandwidth"] > 0 else np.nan)
    sm_pct, mem_pct = _get(q, "sm_pct"), _get(q, "mem_pct")
    bound, pct, evidence = None, np.nan, ""
    if not (np.isnan(sm_pct) or np.isnan(mem_pct)):
        bound = bound_of(sm_pct, mem_pct)
        if bound == "latency":
            pct = max(sm_pct, mem_pct)
            evidence = (f"compute {sm_pct:.0f}% and memory {mem_pct:.0f}% of peak: both below "
                        f"{LATENCY_THRESHOLD_PCT:.0f}%, so neither roof limits it")
        elif bound == "memory":
            pct = mem_pct
            evidence = f"memory throughput {mem_pct:.0f}% of peak (compute {sm_pct:.0f}%)"
        else:
            pct = sm_pct
            evidence = f"compute throughput {sm_pct:.0f}% of peak (memory {mem_pct:.0f}%)"
    elif not (np.isnan(ai) or np.isnan(ridge)):
        mem_roof = dram["bandwidth"] / dram["peak_bandwidth"] * 100
        cmp_roof = achieved_flops / peak_flops * 100 if peak_flops else np.nan
        bound = "memory" if ai < ridge else "compute"
        pct = mem_roof if bound == "memory" else cmp_roof
        if pct < LATENCY_THRESHOLD_PCT:
            bound = "latency"
        evidence = f"intensity {ai:.3g} FLOP/byte vs ridge {ridge:.3g}"
    if evidence and not np.isnan(ai):
        evidence += f"; intensity {ai:.3g} FLOP/byte"
        if not np.isnan(ridge):
            evidence += f" (ridge {ridge:.3g})"
    if not np.isnan(dram["bandwidth"]):
        evidence += f"; DRAM {_fmt(dram['bandwidth'], 'B/s')}"
    missing = [name for name, value in (("flops", total_flops), ("dram_bytes", dram["bytes"]),
                                        ("peaks", peak_flops)) if np.isnan(value)]
    return Roofline(
        bound=bound, arithmetic_intensity=ai, pct_of_roof=pct, precision=precision,
        achieved_flops=achieved_flops, peak_flops=peak_flops,
        achieved_bandwidth=dram["bandwidth"], peak_bandwidth=dram["peak_bandwidth"],
        ridge_point=ridge, peak_source=source, flops=flops, peaks=peaks, levels=levels,
        measured_bandwidth=measured_bandwidth, evidence=evidence.strip("; "), missing=missing,
    )


class Rooflines(Mapping):
    """Launch -> its :class:`Roofline`, computed when read; every launch's bound kept.

    A Roofline is ~3 KB of nested dicts: holding one per launch until the output was
    written took ~160 MB at 50,000 launches. What it is computed from (the metrics and
    quantities it reads, as float arrays) is ~0.2 KB a launch; each output reads a launch's
    Roofline once.
    """

    def __init__(self, wide: pd.DataFrame, quantities: pd.DataFrame, gpu: str | None,
                 measured_bandwidth: float | None = None) -> None:
        w_names = [name for name in ROOFLINE_METRICS if name in wide.columns]
        q_names = [name for name in ROOFLINE_QUANTITIES if name in quantities.columns]
        self._w_values = wide[w_names].to_numpy(dtype="float64")
        self._w_columns = {name: i for i, name in enumerate(w_names)}
        self._w_position = {int(k): i for i, k in enumerate(wide.index.tolist())}
        self._q_values = quantities[q_names].to_numpy(dtype="float64")
        self._q_columns = {name: i for i, name in enumerate(q_names)}
        self._q_position = {int(k): i for i, k in enumerate(quantities.index.tolist())}
        self._gpu, self._measured_bandwidth = gpu, measured_bandwidth
        # The bound from the two throughputs where both are known (as roofline_for decides
        # it), else from the whole roofline.
        sm = self._column("sm_pct")
        mem = self._column("mem_pct")
        self.bound: dict[int, str | None] = {}
        for launch, i in self._q_position.items():
            known = not (math.isnan(sm[i]) or math.isnan(mem[i]))
            self.bound[launch] = bound_of(sm[i], mem[i]) if known else self[launch].bound

    def _column(self, name: str) -> list[float]:
        i = self._q_columns.get(name)
        return ([math.nan] * len(self._q_values) if i is None
                else self._q_values[:, i].tolist())

    def __getitem__(self, launch: int) -> Roofline:
        wide_row = _Row(self._w_values[self._w_position[launch]], self._w_columns)
        quantity_row = _Row(self._q_values[self._q_position[launch]], self._q_columns)
        return roofline_for(wide_row, quantity_row, self._gpu, self._measured_bandwidth)

    def __iter__(self):
        return iter(self._q_position)

    def __len__(self) -> int:
        return len(self._q_position)


class _Row(Mapping):
    """One launch's values as a read-only mapping over a row of a float table."""

    __slots__ = ("_values", "_columns")

    def __init__(self, values: np.ndarray, columns: dict[str, int]) -> None:
        self._values, self._columns = values, columns

    def __getitem__(self, name: str) -> float:
        return float(self._values[self._columns[name]])

    def __iter__(self):
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def get(self, name: str, default=None):
        """The value of ``name`` (``default`` when the table has no such column)."""
        i = self._columns.get(name)
        return default if i is None else float(self._values[i])
