"""Launch-shape analysis: waves, the tail of the last wave, idle SMs, partial warps, tiles.

Definitions (one launch; "slots" = blocks that fit on the GPU at once):

* ``slots = blocks_per_sm x sm_count``; ``waves = grid / slots`` (ncu's
  ``launch__waves_per_multiprocessor``).
* ``full_waves = floor(waves)``; the last wave is ``partial_wave_fill = waves - full_waves`` full.
* Tail: ``tail_idle_slots_pct`` (:func:`tail_idle_pct`) is the share of slot-time left idle in
  the waves that run, assuming every block takes as long: ``(ceil(w) - w) / ceil(w)``. It is
  THE tail figure: the launch-config.tail-effect finding (quantity ``wave_tail_waste_pct``),
  JSON, text and HTML all show it. ``tail_effect_pct`` is Nsight Compute's upper bound
  (LaunchConfiguration rule): the partial wave can cost up to ``1 / (full_waves + 1)`` of
  the run time; kept to match ncu's message, shown only labelled as ncu's bound.
* Small grid: fewer blocks than SMs leaves ``(sm_count - grid) / sm_count`` of the SMs idle.
* Partial warps: a block size that is not a multiple of 32 leaves lanes of its last warp idle:
  ``wasted_lanes_pct = (warps x 32 - block_size) / (warps x 32)``.
* Tile quantization (:func:`tile_quantization`): the share of a tiled output computed
  outside the ``M x N`` matrix because the tiles overhang its edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from ..errors import NcuAdviseError
from ..report import Report
from .occupancy import NCU_LIMIT_METRICS

WARP_SIZE = 32
# ncu's LaunchConfiguration rule reports a tail only when its estimate reaches this (percent).
NCU_TAIL_REPORT_THRESHOLD_PCT = 20.0


@dataclass(frozen=True)
class LaunchShape:
    """How one launch's blocks map onto the GPU.

    Attributes:
        grid_size: blocks in the grid.
        block_size: threads per block.
        sm_count: SMs on the device.
        blocks_per_sm: blocks resident per SM (theoretical occupancy in blocks).
        slots: blocks resident on the whole GPU at once.
        waves: grid / slots.
        full_waves: whole waves.
        partial_wave_fill: how full the last, partial wave is (0 when waves is whole).
        tail_blocks: blocks in the partial wave.
        tail_effect_pct: up to this share of the run time goes to the partial wave
            (``100 / (full_waves + 1)``; 0 without a full wave or without a partial one).
        tail_idle_slots_pct: share of block slots idle over the waves that run.
        idle_sm_pct: share of SMs without a block when the grid is smaller than the SM count.
        small_grid: fewer blocks than SMs.
        grid_per_sm: blocks launched per SM (``grid / sm_count``); below 2 a block waiting at
            ``__syncthreads()`` has no other block on its SM to hide the wait (ncu's hint).
        warps_per_block: warps per block.
        wasted_lanes_pct: share of the block's warp lanes that hold no thread.

    """

    grid_size: int
    block_size: int
    sm_count: int
    blocks_per_sm: int
    slots: int
    waves: float
    full_waves: int
    partial_wave_fill: float
    tail_blocks: int
    tail_effect_pct: float
    tail_idle_slots_pct: float
    idle_sm_pct: float
    small_grid: bool
    grid_per_sm: float
    warps_per_block: int
    wasted_lanes_pct: float

    @property
    def has_tail(self) -> bool:
        """A partial last wave after at least one full wave (ncu's "Tail Effect" condition)."""
        return self.full_waves >= 1 and self.tail_blocks > 0

    def to_dict(self) -> dict:
        """Return a JSON-ready dict."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}  # scalars: no deepcopy
        d["has_tail"] = self.has_tail
        return d


def tail_idle_pct(waves):
    """Share of slot-time idle in the partial last wave, in percent (0 without a tail).

    ``waves`` is a number or a Series (NaN stays NaN). Less than one wave is not a tail (the
    small-grid and partial-wave rules judge that); whole waves have none.
    """
    if not isinstance(waves, pd.Series):  # the same formula on one number
        w = float(waves)
        if math.isnan(w):
            return w
        frac = w - math.floor(w)
        return (1.0 - frac) / math.ceil(w) * 100.0 if w >= 1.0 and frac > 1e-6 else 0.0
    w = waves
    frac = w - np.floor(w)
    tail = (1.0 - frac) / np.ceil(w) * 100.0
    return tail.where((w >= 1.0) & (frac > 1e-6), 0.0).where(w.notna())


def launch_shape(grid_size: int, block_size: int, sm_count: int,
                 blocks_per_sm: int) -> LaunchShape:
    """Analyze a launch shape.

    Args:
        grid_size: blocks in the grid (``launch__grid_size``).
        block_size: threads per block (``launch__block_size``).
        sm_count: SMs on the device (``device__attribute_multiprocessor_count``).
        blocks_per_sm: resident blocks per SM (e.g. from
            :func:`ncu_advisor.derive.occupancy.occupancy`).

    Returns:
        The waves, tail, idle SMs and partial-warp figures.

    Raises:
        NcuAdviseError: a size is not positive.

    """
    grid_size, block_size = int(grid_size), int(block_size)
    sm_count, blocks_per_sm = int(sm_count), int(blocks_per_sm)
    if min(grid_size, block_size, sm_count, blocks_per_sm) <= 0:
        raise NcuAdviseError(
            f"grid, block size, SM count and blocks per SM must be > 0 (got {grid_size}, "
            f"{block_size}, {sm_count}, {blocks_per_sm})")
    slots = blocks_per_sm * sm_count
    waves = grid_size / slots
    full, tail_blocks = divmod(grid_size, slots)
    fill = tail_blocks / slots
    tail_pct = 100.0 / (full + 1) if full >= 1 and tail_blocks else 0.0
    idle_slots_pct = tail_idle_pct(waves) if full >= 1 else (
        100.0 * (slots - grid_size) / slots)
    warps = -(-block_size // WARP_SIZE)
    return LaunchShape(
        grid_size=grid_size, block_size=block_size, sm_count=sm_count,
        blocks_per_sm=blocks_per_sm, slots=slots, waves=waves, full_waves=full,
        partial_wave_fill=fill, tail_blocks=tail_blocks, tail_effect_pct=tail_pct,
        tail_idle_slots_pct=idle_slots_pct,
        idle_sm_pct=100.0 * max(sm_count - grid_size, 0) / sm_count,
        small_grid=grid_size < sm_count, grid_per_sm=grid_size / sm_count, warps_per_block=warps,
        wasted_lanes_pct=100.0 * (warps * WARP_SIZE - block_size) / (warps * WARP_SIZE),
    )


def tile_quantization(m: int, n: int, tile_m: int, tile_n: int) -> float:
    """Return the share of work wasted when an ``m x n`` output is cut into ``tile_m x tile_n``.

    The tiles cover ``ceil(m / tile_m) * tile_m`` by ``ceil(n / tile_n) * tile_n`` elements;
    everything beyond ``m x n`` is computed (or masked) for nothing.  Example:
    ``tile_quantization(1000, 1000, 128, 128)`` is 0.0463 (1024 x 1024 computed).

    Raises:
        NcuAdviseError: a size is not positive.

    """
    if min(m, n, tile_m, tile_n) <= 0:
        raise NcuAdviseError(f"matrix and tile sizes must be > 0 (got {m}x{n}, {tile_m}x{tile_n})")
    covered = math.ceil(m / tile_m) * tile_m * math.ceil(n / tile_n) * tile_n
    return 1.0 - (m * n) / covered


def wave_quantization(tiles: int, sm_count: int, tiles_per_sm: int = 1) -> float:
    """Return the share of SM slots idle in the waves needed for ``tiles`` independent tiles.

    Same idea as :func:`tile_quantization` one level up: 133 tiles on 132 SMs need two waves,
    and the second one is 131/132 empty (returns 0.496).

    Raises:
        NcuAdviseError: a size is not positive.

    """
    if min(tiles, sm_count, tiles_per_sm) <= 0:
        raise NcuAdviseError("tiles, SM count and tiles per SM must be > 0")
    slots = sm_count * tiles_per_sm
    return 1.0 - tiles / (math.ceil(tiles / slots) * slots)


_SM_COUNT_METRICS = ("device__attribute_multiprocessor_count", "launch__sm_count")


def launch_shape_from_report(report: Report, occupancy_table: pd.DataFrame) -> pd.DataFrame:
    """Analyze the shape of every launch in a report.

    Blocks per SM come from the occupancy calculator (``calc_active_blocks`` of
    :func:`ncu_advisor.derive.occupancy_report.occupancy_from_report`, which calls this with
    its table), else from the smallest ``launch__occupancy_limit_*`` ncu reported.

    Args:
        report: a Report with ``launch__grid_size``, ``launch__block_size`` and an SM count.
        occupancy_table: the ``occupancy_from_report`` result of the same report.

    Returns:
        One row per launch (index ``launch``) with the :class:`LaunchShape` fields, and ncu's
        ``launch__waves_per_multiprocessor`` beside ``waves``.  NaN where inputs are missing.

    """
    wide = report.wide()

    def col(*names: str) -> pd.Series:
        for name in names:
            if name in wide.columns and wide[name].notna().any():
                return wide[name]
        return pd.Series(np.nan, index=wide.index)

    blocks = occupancy_table["calc_active_blocks"].reindex(wide.index).astype("float64")
    limits = [m for m in NCU_LIMIT_METRICS.values() if m in wide.columns]
    if limits:
        blocks = blocks.fillna(wide[limits].min(axis=1))
    grid, block, sms = col("launch__grid_size"), col("launch__block_size"), col(*_SM_COUNT_METRICS)
    if "sm_count" in report.session:
        sms = sms.fillna(float(report.session["sm_count"]))
    names = list(LaunchShape.__dataclass_fields__)
    rows = []
    inputs = np.column_stack([s.to_numpy(dtype="float64") for s in (grid, block, sms, blocks)])
    for values in inputs.tolist():  # plain floats: a Series lookup per value cost more
        if any(math.isnan(v) or v <= 0 for v in values):
            rows.append(dict.fromkeys(names, np.nan))
            continue
        rows.append(launch_shape(*(int(round(v)) for v in values)).to_dict())
    table = pd.DataFrame(rows, index=wide.index, columns=[*names, "has_tail"])
    table["launch__waves_per_multiprocessor"] = col("launch__waves_per_multiprocessor")
    return table


__all__ = [
    "NCU_TAIL_REPORT_THRESHOLD_PCT", "LaunchShape", "launch_shape", "launch_shape_from_report",
    "tail_idle_pct", "tile_quantization", "wave_quantization",
]
