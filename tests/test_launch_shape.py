"""Launch-shape analysis: waves, tails, idle SMs and partial warps, checked against ncu."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLE_CAPTURES, first_of_each_form, read_cached

from ncu_advisor.derive.launch_shape import (
    launch_shape,
    launch_shape_from_report,
    tile_quantization,
    wave_quantization,
)
from ncu_advisor.derive.occupancy_report import occupancy_from_report
from ncu_advisor.errors import NcuAdviseError

SAMPLES = Path(__file__).resolve().parents[1] / "sample_reports"
CAPTURES = SAMPLE_CAPTURES


@cache
def shapes(path: Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    try:
        report = read_cached(path)  # read once per test run, shared with other modules
    except NcuAdviseError:
        return None
    if "launch__waves_per_multiprocessor" not in report.wide().columns:
        return None
    return launch_shape_from_report(report, occupancy_from_report(report)), report.ncu_rules


def _rel(path: Path) -> str:
    return path.relative_to(SAMPLES).as_posix()


def test_waves_and_tail() -> None:
    # torch's elementwise kernel: 4096 blocks of 128 threads, 16 per SM on 132 SMs.
    s = launch_shape(4096, 128, 132, 16)
    assert s.slots == 2112 and s.full_waves == 1 and s.tail_blocks == 1984
    assert s.waves == pytest.approx(1.939394, abs=1e-6)
    assert s.partial_wave_fill == pytest.approx(1984 / 2112)
    assert s.tail_effect_pct == 50.0 and s.has_tail
    assert s.tail_idle_slots_pct == pytest.approx(100 * 128 / 4224)
    assert not s.small_grid and s.idle_sm_pct == 0.0
    d = s.to_dict()
    assert d["has_tail"] is True and d["full_waves"] == 1


def test_whole_waves_have_no_tail() -> None:
    s = launch_shape(264, 256, 132, 1)
    assert (s.waves, s.full_waves, s.tail_blocks, s.tail_effect_pct) == (2.0, 2, 0, 0.0)
    assert not s.has_tail


def test_less_than_one_wave_is_not_a_tail() -> None:
    s = launch_shape(1024, 256, 132, 8)
    assert s.full_waves == 0 and s.tail_effect_pct == 0.0 and not s.has_tail


def test_small_grid_and_partial_warps() -> None:
    s = launch_shape(4, 100, 132, 16)
    assert s.small_grid and s.idle_sm_pct == pytest.approx(100 * 128 / 132)
    assert s.warps_per_block == 4
    assert s.wasted_lanes_pct == pytest.approx(21.875)  # 28 of 128 lanes
    assert s.grid_per_sm == pytest.approx(4 / 132)


def test_bad_shapes() -> None:
    with pytest.raises(NcuAdviseError):
        launch_shape(0, 128, 132, 8)
    with pytest.raises(NcuAdviseError):
        tile_quantization(100, 100, 0, 16)
    with pytest.raises(NcuAdviseError):
        wave_quantization(10, 0)


def test_tile_quantization() -> None:
    assert tile_quantization(1024, 1024, 128, 128) == 0.0
    assert tile_quantization(1000, 1000, 128, 128) == pytest.approx(1 - 1e6 / 1024**2)
    assert tile_quantization(129, 64, 128, 64) == pytest.approx(1 - 129 / 256)
    assert wave_quantization(132, 132) == 0.0
    assert wave_quantization(133, 132) == pytest.approx(1 - 133 / 264)
    assert wave_quantization(264, 132, tiles_per_sm=2) == 0.0


@pytest.mark.parametrize("path", first_of_each_form(CAPTURES), ids=_rel)
def test_waves_match_ncu(path: Path) -> None:
    found = shapes(path)
    if found is None:
        pytest.skip("no LaunchStats metrics in this capture")
    table = found[0].dropna(subset=["waves", "launch__waves_per_multiprocessor"])
    if table.empty:
        pytest.skip("no launch with waves")
    # Exports print waves with 2 decimals (raw auto units: 0.00 for 0.000947).
    diff = (table["waves"] - table["launch__waves_per_multiprocessor"]).abs()
    assert (diff <= 0.005 + 1e-6 * table["waves"]).all(), table[diff > 0.005]


_PARTIAL = re.compile(r"(\d+) full waves and a partial wave of (\d+) thread blocks")


def _rule_rows():
    for path in CAPTURES:
        found = shapes(path)
        if found is None:
            continue
        table, rules = found
        rules = rules[rules["rule"] == "LaunchConfiguration"]
        for _, rule in rules.iterrows():
            yield path, table.loc[rule["launch"]], rule


@pytest.mark.slow  # reads every capture; the quick run checks the first of each form
def test_tail_and_small_grid_estimates_match_ncu_rules() -> None:
    tails = grids = 0
    for path, shape, rule in _rule_rows():
        text = str(rule["description"])
        if m := _PARTIAL.search(text):
            tails += 1
            assert shape["full_waves"] == int(m.group(1)), path
            # ncu rounds the partial wave up from a float: 396 blocks print as 397.
            assert abs(shape["tail_blocks"] - int(m.group(2))) <= 1, path
            assert shape["tail_effect_pct"] == pytest.approx(rule["speedup"], abs=0.01), path
        elif "less than the GPU's" in text:
            grids += 1
            assert shape["small_grid"], path
            assert shape["idle_sm_pct"] == pytest.approx(rule["speedup"], abs=0.01), path
    assert tails >= 3 and grids >= 2
