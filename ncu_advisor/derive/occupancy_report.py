"""The occupancy of every launch of a Report: ncu's Occupancy section beside the calculator.

The calculator (:mod:`.occupancy`) is pure arithmetic on a launch's inputs; this module reads
those inputs from a report (undoing the rounding of CSV exports), runs it on every launch, and
builds each launch's ``occupancy`` and ``launch_shape`` entries of the JSON contract, complete,
in one place (:func:`launch_occupancy`): what ncu measured, then what the calculator adds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import NcuAdviseError
from ..report import Report
from .launch_shape import launch_shape_from_report
from .occupancy import (
    INPUT_METRICS,
    LIMIT_NAMES,
    NCU_ACHIEVED_PCT,
    NCU_LIMIT_METRICS,
    NCU_THEORETICAL_PCT,
    best_block_size,
    fewer_registers,
    occupancy,
)

_BYTE_METRICS = ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
# Numbers whose exported text is read (for its printed precision): metric_use.analysis_texts.
EXPORTED_TEXT_METRICS = _BYTE_METRICS
# cudaFuncSetCacheConfig preferences as the carveout percentages the driver applies.
_CACHE_CONFIG_PCT = {"CachePreferL1": 0, "CachePreferEqual": 50, "CachePreferShared": 100}
_DECIMALS = re.compile(r"\.(\d+)\s*$")


def _export_resolution(values: pd.Series, texts: pd.Series) -> pd.Series:
    """Return how many base units the exported text can be off by (0 when exact).

    ``2.05 Kbyte`` was printed from anything in 2,045..2,055 bytes: the text's last digit
    is worth 10 bytes.  Texts without a decimal point are exact.
    """
    clean = texts.fillna("").astype(str).str.replace(",", "", regex=False)
    printed = pd.to_numeric(clean.str.replace(r"\s*\(.*$", "", regex=True), errors="coerce")
    decimals = clean.str.extract(_DECIMALS, expand=False).str.len()
    scale = (values / printed).where(printed != 0, 1.0).fillna(1.0)
    step = (10.0 ** -decimals.astype("float64")) * scale
    return step.where(decimals.notna(), 0.0).fillna(0.0)


def _snap_bytes(value: float, resolution: float, unit: int) -> float:
    """Undo export rounding: the multiple of ``unit`` the printed value can stand for."""
    if not np.isfinite(value) or resolution <= 1.0:
        return value
    candidate = round(value / unit) * unit
    return float(candidate) if abs(candidate - value) <= resolution / 2 else value


def _inputs(report: Report) -> pd.DataFrame:
    """Launch x calculator inputs, with byte sizes corrected for export rounding."""
    wide = report.wide()
    cols = {k: (wide[m] if m in wide.columns else pd.Series(np.nan, index=wide.index))
            for k, m in INPUT_METRICS.items()}
    frame = pd.DataFrame(cols, index=wide.index)
    rows = report.metric_rows(_BYTE_METRICS).drop_duplicates(["launch", "metric"])
    if not rows.empty:
        res = _export_resolution(rows["value"], rows["text"])
        fixed = [_snap_bytes(v, r, 128) for v, r in zip(rows["value"], res, strict=True)]
        snapped = rows.assign(value=fixed).pivot(index="launch", columns="metric",
                                                 values="value")
        for key, metric in (("shared_mem_static", _BYTE_METRICS[0]),
                            ("shared_mem_dynamic", _BYTE_METRICS[1])):
            if metric in snapped.columns:
                frame[key] = snapped[metric].reindex(frame.index)
    cc = report.launches.set_index("launch")["cc"].reindex(frame.index).astype("string")
    if "device__attribute_compute_capability_major" in wide.columns:
        major = wide["device__attribute_compute_capability_major"]
        minor = wide.get("device__attribute_compute_capability_minor",
                         pd.Series(0.0, index=wide.index))
        from_attr = (major.astype("Int64").astype("string") + "."
                     + minor.fillna(0).astype("Int64").astype("string"))
        cc = cc.fillna(from_attr)
    frame["cc"] = cc
    cache = report.metric_rows(["launch__func_cache_config"]).drop_duplicates("launch")
    frame["carveout_pct"] = (cache.set_index("launch")["text"].map(_CACHE_CONFIG_PCT)
                             .reindex(frame.index))
    return frame


_CALC_COLUMNS = [
    "block_size", "registers_per_thread", "shared_mem_per_block", "shared_mem_config",
    "predicted_shared_mem_config", *(f"calc_limit_{k}" for k in LIMIT_NAMES), "calc_limiter",
    "calc_active_blocks", "calc_active_warps", "calc_theoretical_pct", "recommended_block_size",
    "recommended_theoretical_pct", "what_if_fewer_regs_pct",
]


def occupancy_from_report(report: Report, what_if_registers: int = 8) -> pd.DataFrame:
    """Compute the occupancy of every launch and put it beside what Nsight Compute reported.

    Args:
        report: a Report with LaunchStats metrics (``launch__block_size``,
            ``launch__registers_per_thread``, ``launch__shared_mem_per_block_static`` /
            ``_dynamic``, ``launch__shared_mem_config_size``).
        what_if_registers: the register reduction for the ``what_if_fewer_regs_pct`` column.

    Returns:
        One row per launch (index ``launch``).  Calculator columns: ``cc``, ``block_size``,
        ``registers_per_thread``, ``shared_mem_per_block``, ``shared_mem_config``
        (the carveout used: ncu's when reported, else predicted),
        ``predicted_shared_mem_config`` (the driver's choice as modelled, honouring a
        ``launch__func_cache_config`` preference), ``calc_limit_<resource>``, ``calc_limiter``,
        ``calc_active_blocks``, ``calc_active_warps``, ``calc_theoretical_pct``,
        ``recommended_block_size``, ``recommended_theoretical_pct``,
        ``what_if_fewer_regs_pct``; ncu's own values under their metric names
        (``sm__maximum_warps_per_active_cycle_pct``, the achieved
        ``sm__warps_active.avg.pct_of_peak_sustained_active``, ``launch__occupancy_limit_*``),
        ``ncu_limiter`` and ``matches_ncu`` (all four limits equal and theoretical % within
        0.01; NaN when ncu's values are missing).  Launches without the inputs get NaN.

    """
    inputs = _inputs(report)
    wide = report.wide()
    # Launches of one kernel share their inputs: each distinct set is computed once, and
    # the results are kept as columns (a dict per launch was ~1.5 KB, twice over).
    computed: dict[tuple, dict | None] = {}
    columns: dict[str, list] = {name: [] for name in _CALC_COLUMNS}
    for values in zip(*(inputs[c].tolist() for c in _CALC_INPUTS), strict=True):
        key = tuple(None if pd.isna(v) else v for v in values)  # NaN never equals itself
        if key not in computed:
            computed[key] = _calculate(dict(zip(_CALC_INPUTS, values, strict=True)),
                                       what_if_registers)
        result = computed[key] or {}
        for name, column in columns.items():
            column.append(result.get(name, np.nan))
    table = pd.DataFrame({"cc": inputs["cc"].tolist(), **columns},
                         index=inputs.index.rename("launch"))
    for metric in (NCU_THEORETICAL_PCT, NCU_ACHIEVED_PCT, *NCU_LIMIT_METRICS.values()):
        table[metric] = wide[metric].reindex(table.index) if metric in wide.columns else np.nan
    table["ncu_limiter"] = [limiter_of(limits) for limits in _ncu_limits(table)]
    table["matches_ncu"] = _matches_ncu(table)
    return table


_CALC_INPUTS = ("cc", "block_size", "registers_per_thread", "shared_mem_static",
                "shared_mem_dynamic", "shared_mem_config", "carveout_pct")


def _calculate(row: dict, what_if_registers: int) -> dict | None:
    """The calculator's columns for one set of inputs (None when they are incomplete)."""
    needed = [row["block_size"], row["registers_per_thread"]]
    if pd.isna(row["cc"]) or any(pd.isna(v) for v in needed):
        return None
    smem = float(np.nansum([row["shared_mem_static"], row["shared_mem_dynamic"]]))
    config = row["shared_mem_config"]
    try:
        res = occupancy(str(row["cc"]), int(row["block_size"]),
                        int(round(row["registers_per_thread"])), int(round(smem)),
                        carveout=None if pd.isna(config) else float(config))
        pct = row["carveout_pct"]
        predicted = occupancy(res.cc, res.block_size, res.registers_per_thread,
                              res.shared_mem_per_block,
                              preferred_carveout_pct=None if pd.isna(pct) else int(pct))
        best = best_block_size(res.cc, res.registers_per_thread, res.shared_mem_per_block)
        fewer = fewer_registers(res, what_if_registers)
    except NcuAdviseError:  # e.g. a compute capability outside the table
        return None
    return {
        "block_size": res.block_size,
        "registers_per_thread": res.registers_per_thread,
        "shared_mem_per_block": res.shared_mem_per_block,
        "shared_mem_config": res.shared_mem_config,
        "predicted_shared_mem_config": predicted.shared_mem_config,
        **{f"calc_limit_{k}": v for k, v in res.limits.items()},
        "calc_limiter": res.limiter,
        "calc_active_blocks": res.active_blocks_per_sm,
        "calc_active_warps": res.active_warps_per_sm,
        "calc_theoretical_pct": res.theoretical_pct,
        "recommended_block_size": best.block_size,
        "recommended_theoretical_pct": best.theoretical_pct,
        "what_if_fewer_regs_pct": fewer.theoretical_pct,
    }


def _matches_ncu(table: pd.DataFrame) -> list[float | bool]:
    """:func:`_matches` of every launch, read from the table's columns (no dict per row)."""
    names = [*(f"calc_limit_{k}" for k in NCU_LIMIT_METRICS), *NCU_LIMIT_METRICS.values(),
             "calc_theoretical_pct", NCU_THEORETICAL_PCT]
    present = [n for n in names if n in table.columns]
    out = []
    for values in zip(*(table[n].tolist() for n in present), strict=True):
        out.append(_matches(dict(zip(present, values, strict=True))))
    return out


def _matches(row: dict) -> float | bool:
    """Whether the calculator agrees with ncu on one launch (NaN when either side is missing)."""
    pairs = [(row.get(f"calc_limit_{k}"), row.get(m)) for k, m in NCU_LIMIT_METRICS.items()]
    pairs.append((row.get("calc_theoretical_pct"), row.get(NCU_THEORETICAL_PCT)))
    if any(pd.isna(a) or pd.isna(b) for a, b in pairs):
        return np.nan
    limits_ok = all(int(a) == int(round(b)) for a, b in pairs[:-1])
    return bool(limits_ok and math.isclose(pairs[-1][0], pairs[-1][1], abs_tol=0.01))


class _Floats:
    """One column as JSON-safe floats by position (None for NaN, inf and non-numbers).

    Kept as a float array: a list of Python floats was 4x the memory, per column and launch.
    """

    __slots__ = ("_array",)

    def __init__(self, values: pd.Series) -> None:
        self._array = pd.to_numeric(values, errors="coerce").to_numpy(dtype="float64",
                                                                      copy=True)
        self._array[~np.isfinite(self._array)] = np.nan

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, i: int) -> float | None:
        value = float(self._array[i])
        return None if value != value else value


class _Ints(_Floats):
    """One column as whole numbers by position (rounded; None where missing)."""

    __slots__ = ()

    def __getitem__(self, i: int) -> int | None:
        value = float(self._array[i])
        return None if value != value else int(round(value))


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A column of ``frame``, all NaN when it is absent."""
    return frame[name] if name in frame.columns else pd.Series(np.nan, index=frame.index)


def _ncu_limit_columns(wide: pd.DataFrame) -> dict[str, _Ints]:
    """Per resource: the block limits ncu reported (``launch__occupancy_limit_*``)."""
    return {k: _Ints(_column(wide, m)) for k, m in NCU_LIMIT_METRICS.items()}


def _ncu_limits(wide: pd.DataFrame) -> list[dict[str, int | None]]:
    """Per launch: the block limits ncu reported (``launch__occupancy_limit_*``)."""
    rows = _Rows(_ncu_limit_columns(wide))
    return [rows[i] for i in range(len(rows))]


def limiter_of(limits: dict[str, int | None]) -> str | None:
    """The resource(s) with the lowest block limit, ``+``-joined on a tie; None when unknown."""
    known = {k: v for k, v in limits.items() if v is not None}
    if not known:
        return None
    low = min(known.values())
    return "+".join(k for k, v in known.items() if v == low)


# The launch-shape fields of the JSON contract (derive/launch_shape.py's LaunchShape).
_SHAPE_FIELDS = ["grid_size", "block_size", "sm_count", "blocks_per_sm", "waves", "full_waves",
                 "partial_wave_fill", "tail_blocks", "tail_idle_slots_pct", "tail_effect_pct",
                 "idle_sm_pct", "small_grid", "grid_per_sm", "wasted_lanes_pct"]


def launch_occupancy(report: Report, quantities: pd.DataFrame,
                     ) -> tuple[dict[int, dict], dict[int, dict]]:
    """Build every launch's ``occupancy`` and ``launch_shape`` entries of the JSON contract.

    Args:
        report: the Report analyzed.
        quantities: its derived quantities, one row per launch (``theoretical_occupancy_pct``,
            ``achieved_occupancy_pct``, ``registers_per_thread``, ... may come from ncu's rule
            messages on a details page, where the raw metrics are absent).

    Returns:
        Per launch: the occupancy entry (ncu's measured values, its block limits and their
        limiter, then the calculator's theoretical occupancy, limiter, suggested block size
        and the effect of 8 fewer registers; null where not measured), and the launch shape
        (empty when the report lacks the launch metrics).

    """
    launches = list(quantities.index)
    try:
        table = occupancy_from_report(report).reindex(launches)
        shapes = launch_shape_from_report(report, table)
    except (KeyError, ValueError, TypeError):  # a report without the launch metrics
        table, shapes = pd.DataFrame(index=launches), None
    limit_columns = _ncu_limit_columns(report.wide().reindex(launches))
    limits = _Rows(limit_columns)
    columns = {
        "theoretical_pct": _Floats(_column(quantities, "theoretical_occupancy_pct")),
        "achieved_pct": _Floats(_column(quantities, "achieved_occupancy_pct")),
        "limiter": [limiter_of(limits[i]) for i in range(len(launches))],
        "limits": limits,
        "registers_per_thread": _Ints(_column(quantities, "registers_per_thread")),
        "shared_mem_per_block": _Floats(_column(quantities, "shared_mem_per_block")),
        "block_size": _Ints(_column(quantities, "block_size")),
        "waves_per_sm": _Floats(_column(quantities, "waves_per_sm")),
        "calc_theoretical_pct": _Floats(_column(table, "calc_theoretical_pct")),
        "recommended_block_size": _Ints(_column(table, "recommended_block_size")),
        "what_if_fewer_registers_pct": _Floats(_column(table, "what_if_fewer_regs_pct")),
        "calc_limiter": [v if isinstance(v, str) else None
                         for v in _column(table, "calc_limiter")],
    }
    entries = LaunchEntries(launches, columns)
    if shapes is None:
        return entries, {}
    fields = [c for c in _SHAPE_FIELDS if c in shapes.columns]
    shape_columns = {c: _Floats(shapes[c]) for c in fields}
    if "small_grid" in shape_columns:
        shape_columns["small_grid"] = [None if pd.isna(v) else bool(v)
                                       for v in shapes["small_grid"]]
    return entries, LaunchEntries(shapes.index, shape_columns)


class _Rows:
    """Columns of per-launch values; row ``i`` is a new dict each time it is asked for.

    A dict per launch (and per nested entry) held ~1 KB a launch until the output was
    written: ~100 MB for the occupancy and launch-shape entries at 50,000 launches.
    """

    __slots__ = ("_names", "_columns", "_length")

    def __init__(self, columns: dict[str, list]) -> None:
        self._names = list(columns)
        self._columns = list(columns.values())
        self._length = len(self._columns[0]) if self._columns else 0

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, i: int) -> dict:
        return {name: column[i] for name, column in zip(self._names, self._columns, strict=True)}


class LaunchEntries(Mapping):
    """Launch number -> its JSON entry (a dict), built from columns when read.

    ``columns``: field name -> its values in the order of ``launches`` (lists, or the
    float columns above).
    """

    __slots__ = ("_position", "_rows")

    def __init__(self, launches, columns: dict) -> None:
        self._position = {int(launch): i for i, launch in enumerate(launches)}
        self._rows = _Rows(columns)

    def __getitem__(self, launch: int) -> dict:
        return self._rows[self._position[launch]]

    def __iter__(self):
        return iter(self._position)

    def __len__(self) -> int:
        return len(self._position)
