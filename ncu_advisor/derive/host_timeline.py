"""Where the GPU waits on the host: a launch-queue model of a captured sequence.

ncu replays each kernel alone and records no gaps between launches, so a capture cannot show
idle time; it shows the launch order and each kernel's duration. Given what the host spends
to issue one launch, a queue gives the rest: the host issues launch i at ``i x cost`` (it can
run ahead of the GPU, never behind it), and the GPU starts a launch once it is issued and the
previous one has finished. Long kernels let the host run ahead and fill the queue; a stretch
of launches shorter than their issue cost drains it, and then the GPU waits before each one.
The summed waits are what launching the sequence at once (a CUDA graph) or launching less
(fusion, batching) would remove; the launches bound by launching are the ones those changes
touch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

# Host time per launch. Measured on the H200 host (sample_reports/corpus/timings.jsonl,
# complete captures of eager PyTorch steps bound by launching, step time over launches):
# batch-1 decode 1.99 ms / 67 launches, batch-64 decode 1.62 ms / 71, BERT 1.22 ms / 48, MoE
# 0.82 ms / 46: 18-30 us a launch, Python's module calls and PyTorch's dispatch included.
# 15 us, under the lowest of those, is taken for programs driven from Python (eager PyTorch
# or CuPy ops, torch.compile's wrapper): the waits are a floor. A C++ program's
# cudaLaunchKernel costs a few microseconds.
PYTHON_LAUNCH_NS = 15_000.0
NATIVE_LAUNCH_NS = 5_000.0
# A step whose GPU idles this share of the time is bound by launching throughout: every launch
# belongs to the problem, not only those shorter than their wait.
HOST_BOUND_PCT = 50.0
# Columns a launch table may carry when its rows stand for several launches (a census-weighted
# profile): the model was run on the census's full sequence, these are its sums per row.
WAIT_COLUMN = "host_wait_ns"
BOUND_COLUMN = "host_bound_launches"


@dataclass(frozen=True)
class HostTimeline:
    """The queue model's result for one input, per launch row."""

    wait_ns: pd.Series  # launch -> GPU idle time before it (summed over what the row stands for)
    bound: pd.Series  # launch -> how many of its launches are bound by launching
    gpu_ns: float  # GPU time of the modelled launches
    launch_ns: float  # the host cost per launch assumed (the largest where several apply)

    @property
    def idle_ns(self) -> float:
        """The GPU's summed waits."""
        return float(np.nansum(self.wait_ns.to_numpy(dtype="float64")))

    @property
    def idle_pct(self) -> float:
        """The waits' share of the modelled sequence's time (GPU time plus waits)."""
        total = self.gpu_ns + self.idle_ns
        return 100.0 * self.idle_ns / total if total else 0.0

    def launch_bound(self) -> list[int]:
        """The launch rows with launches bound by launching, in order."""
        return [int(i) for i in self.bound.index[(self.bound > 0).to_numpy()]]


def python_driven(origin: pd.Series, eager: pd.Series) -> bool:
    """A sequence launched from Python: an eager framework's ops or torch.compile's kernels."""
    return bool(eager.fillna(False).astype(bool).any() or origin.eq("triton-inductor").any())


def _launch_cost(rows: pd.DataFrame) -> float:
    """The host cost per launch of a sequence, from whose kernels it launches."""
    if "origin" in rows and "origin_eager" in rows and python_driven(rows["origin"],
                                                                      rows["origin_eager"]):
        return PYTHON_LAUNCH_NS
    return NATIVE_LAUNCH_NS


def queue_model(durations: np.ndarray, cost_ns: float) -> tuple[np.ndarray, np.ndarray]:
    """Per launch of one ordered sequence: the GPU's wait before it, and whether it is bound.

    A launch is bound by launching when the GPU waited at least as long as it runs (a GEMM
    that waited a few microseconds is still its own work; a 3 us add after a 12 us wait is
    mostly launch), or when the sequence idles half its time or more: it is bound by
    launching throughout, and launching it at once touches every launch. A launch of
    unknown duration neither waits nor fills the queue.
    """
    waits = np.full(len(durations), np.nan)
    issued = end = 0.0
    for i, duration in enumerate(durations):
        if not np.isnan(duration):
            start = max(end, issued)
            waits[i] = start - end
            end = start + duration
        issued += cost_ns
    gpu, idle = float(np.nansum(durations)), float(np.nansum(waits))
    with np.errstate(invalid="ignore"):
        if gpu + idle and 100.0 * idle / (gpu + idle) >= HOST_BOUND_PCT:
            bound = ~np.isnan(waits)
        else:
            bound = (waits > 0) & (waits >= durations)
    return waits, bound


def host_timeline(launches: pd.DataFrame) -> HostTimeline | None:
    """Model the GPU's waits for every launch sequence of an input (one per source and process).

    Launch rows are taken in ncu's order within each source file and process; streams are not
    told apart (ncu serializes them too). Rows that stand for several launches have no order
    of their own: they are modelled only where they carry the census's sums
    (:data:`WAIT_COLUMN`, :data:`BOUND_COLUMN`); a per-kernel summary is not modelled (None).
    """
    if not len(launches) or "duration_ns" not in launches:
        return None
    if "form" in launches and launches["form"].eq("summary").any():
        return None
    calls = launches["invocations"].fillna(1) if "invocations" in launches else None
    weighted = calls is not None and bool((calls > 1).any())
    if weighted:
        if WAIT_COLUMN not in launches or BOUND_COLUMN not in launches:
            return None
        index = launches["launch"].astype(int)
        gpu = float(np.nansum(launches["duration_ns"] * calls))
        return HostTimeline(pd.Series(launches[WAIT_COLUMN].to_numpy(), index=index),
                            pd.Series(launches[BOUND_COLUMN].fillna(0).to_numpy(), index=index),
                            gpu, _launch_cost(launches))
    waits: dict[int, float] = {}
    bound: dict[int, float] = {}
    costs = [NATIVE_LAUNCH_NS]
    keys = [k for k in ("source", "process_id") if k in launches]
    groups = launches.groupby(keys, dropna=False, sort=False) if keys else [((), launches)]
    for _, rows in groups:
        rows = rows.sort_values("id" if rows["id"].notna().all() else "launch")
        cost = _launch_cost(rows)
        costs.append(cost)
        w, b = queue_model(rows["duration_ns"].to_numpy(dtype="float64"), cost)
        waits.update(zip(rows["launch"].astype(int).tolist(), w.tolist(), strict=True))
        bound.update(zip(rows["launch"].astype(int).tolist(), b.astype(float).tolist(),
                         strict=True))
    gpu = float(np.nansum(launches["duration_ns"].to_numpy(dtype="float64")))
    return HostTimeline(pd.Series(waits, dtype="float64"), pd.Series(bound, dtype="float64"),
                        gpu, max(costs))
