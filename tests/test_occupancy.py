"""The occupancy calculator against Nsight Compute: every capture in sample_reports/, an H200 probe.

The capture test covers every `.ncu-rep` and `.csv` under sample_reports/ that holds the
LaunchStats and Occupancy metrics, so new captures are checked as they land.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
import typer
from conftest import SAMPLE_CAPTURES, analysis_cached, first_of_each_form, read_cached
from typer.testing import CliRunner

from ncu_advisor.cli.occupancy import occupancy_command
from ncu_advisor.derive.gpu_specs import ARCH_SPECS, arch_spec, normalize_cc
from ncu_advisor.derive.occupancy import (
    NCU_LIMIT_METRICS,
    NCU_THEORETICAL_PCT,
    best_block_size,
    calculator_summary,
    check_launch_inputs,
    fewer_registers,
    occupancy,
    predict_shared_mem_config,
    registers_for_more_blocks,
    shared_mem_for_more_blocks,
    snap_carveout,
    what_if,
)
from ncu_advisor.derive.occupancy_report import launch_occupancy, occupancy_from_report
from ncu_advisor.errors import NcuAdviseError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_reports"
CAPTURES = SAMPLE_CAPTURES
NEEDED = ["launch__block_size", "launch__registers_per_thread", NCU_THEORETICAL_PCT,
          *NCU_LIMIT_METRICS.values()]
# Captures that must be checked, and how many launches each holds with occupancy metrics
# (the sweep's 24th launch failed and has no metrics).
REQUIRED = {
    "occupancy/occ_sweep.ncu-rep": 23,
    "forms/forms_app.ncu-rep.gz": 9,
    "forms/torch_mlp.live.nvtx.csv.gz": 8,
}


@cache
def checked(path: Path) -> pd.DataFrame | None:
    """The calculator's table for the launches of one capture that ncu gave limits for."""
    try:
        report = read_cached(path)  # read once per test run, shared with other modules
    except NcuAdviseError:
        return None
    wide = report.wide()
    if any(m not in wide.columns for m in NEEDED):
        return None
    table = occupancy_from_report(report)
    return table[table[NEEDED[2:]].notna().all(axis=1)]


def _rel(path: Path) -> str:
    return path.relative_to(SAMPLES).as_posix()


@pytest.mark.parametrize("path", first_of_each_form(CAPTURES), ids=_rel)
def test_matches_ncu_on_every_launch(path: Path) -> None:
    table = checked(path)
    if table is None or table.empty:
        pytest.skip("no LaunchStats/Occupancy metrics in this capture")
    bad = []
    for launch, row in table.iterrows():
        for name, metric in NCU_LIMIT_METRICS.items():
            if row[f"calc_limit_{name}"] != row[metric]:
                bad.append(f"launch {launch}: {name} limit {row[f'calc_limit_{name}']} "
                           f"!= ncu {row[metric]}")
        if not math.isclose(row["calc_theoretical_pct"], row[NCU_THEORETICAL_PCT], abs_tol=0.01):
            bad.append(f"launch {launch}: theoretical {row['calc_theoretical_pct']} "
                       f"!= ncu {row[NCU_THEORETICAL_PCT]}")
    assert not bad, "\n".join(bad)
    assert table["matches_ncu"].all()


@pytest.mark.slow  # reads every capture; the quick run checks the first of each form
def test_enough_launches_checked() -> None:
    counts = {_rel(p): len(t) for p in CAPTURES if (t := checked(p)) is not None}
    for name, n in REQUIRED.items():
        assert counts.get(name) == n, f"{name}: {counts.get(name)} launches checked, want {n}"
    assert sum(counts.values()) >= 200
    assert len([n for n in counts.values() if n]) >= 15


@pytest.mark.parametrize("name", ["occupancy/occ_sweep.ncu-rep", "forms/forms_app.ncu-rep.gz",
                                  "forms/torch_mlp.live.nvtx.csv.gz"])
def test_predicted_carveout_matches_the_driver(name: str) -> None:
    table = checked(SAMPLES / name)
    assert table is not None and len(table) == REQUIRED[name]
    assert (table["predicted_shared_mem_config"] == table["shared_mem_config"]).all()


# Observed on an H200 (cc 9.0, driver 580.159.04, ncu 2025.3.1, default carveout preference),
# a sample of the 608 default launches of two probe programs (docs/occupancy.md):
# block size, registers, static+dynamic shared memory (bytes), launch__shared_mem_config_size
# (KiB), then ncu's block limits (registers, shared memory, warps, blocks) and theoretical %.
H200_PROBE = [
    (32, 20, 0, 32, 84, 32, 64, 32, 50),
    (32, 128, 0, 32, 16, 32, 64, 32, 25),
    (64, 56, 0, 32, 18, 32, 32, 32, 56.25),
    (96, 20, 0, 32, 28, 32, 21, 32, 98.4375),
    (96, 128, 0, 32, 5, 32, 21, 32, 23.4375),
    (128, 56, 0, 32, 9, 32, 16, 32, 56.25),
    (160, 20, 0, 32, 16, 32, 12, 32, 93.75),
    (160, 128, 0, 32, 3, 32, 12, 32, 23.4375),
    (160, 255, 0, 8, 1, 8, 12, 32, 7.8125),
    (192, 56, 0, 32, 6, 32, 10, 32, 56.25),
    (224, 20, 0, 32, 12, 32, 9, 32, 98.4375),
    (224, 128, 0, 32, 2, 32, 9, 32, 21.875),
    (224, 255, 0, 8, 1, 8, 9, 32, 10.9375),
    (256, 56, 0, 32, 4, 32, 8, 32, 50),
    (288, 20, 0, 32, 9, 32, 7, 32, 98.4375),
    (288, 128, 0, 8, 1, 8, 7, 32, 14.0625),
    (320, 72, 0, 32, 2, 32, 6, 32, 31.25),
    (320, 168, 0, 8, 1, 8, 6, 32, 15.625),
    (384, 48, 0, 32, 3, 32, 5, 32, 56.25),
    (384, 168, 0, 8, 1, 8, 5, 32, 18.75),
    (448, 20, 0, 32, 6, 32, 4, 32, 87.5),
    (448, 128, 0, 8, 1, 8, 4, 32, 21.875),
    (480, 20, 0, 32, 5, 32, 4, 32, 93.75),
    (480, 56, 0, 32, 2, 32, 4, 32, 46.875),
    (500, 20, 0, 16, 5, 16, 4, 32, 100),
    (512, 20, 0, 16, 5, 16, 4, 32, 100),
    (512, 56, 0, 16, 2, 16, 4, 32, 50),
    (512, 72, 0, 8, 1, 8, 4, 32, 25),
    (512, 96, 0, 8, 1, 8, 4, 32, 25),
    (576, 72, 0, 8, 1, 8, 3, 32, 28.125),
    (640, 72, 0, 8, 1, 8, 3, 32, 31.25),
    (704, 56, 0, 8, 1, 8, 2, 32, 34.375),
    (704, 72, 0, 8, 1, 8, 2, 32, 34.375),
    (736, 20, 0, 16, 3, 16, 2, 32, 71.875),
    (736, 56, 0, 8, 1, 8, 2, 32, 35.9375),
    (768, 20, 0, 8, 3, 8, 2, 32, 75),
    (768, 56, 0, 8, 1, 8, 2, 32, 37.5),
    (896, 20, 0, 8, 3, 8, 2, 32, 87.5),
    (896, 56, 0, 8, 1, 8, 2, 32, 43.75),
    (1024, 32, 0, 8, 2, 8, 2, 32, 100),
    (1024, 56, 0, 8, 1, 8, 2, 32, 50),
    (256, 20, 256, 32, 10, 25, 8, 32, 100),
    (768, 20, 256, 8, 3, 6, 2, 32, 75),
    (384, 20, 512, 16, 7, 10, 5, 32, 93.75),
    (512, 20, 1024, 16, 5, 8, 4, 32, 100),
    (32, 20, 2048, 100, 84, 33, 64, 32, 50),
    (736, 20, 2048, 16, 3, 5, 2, 32, 71.875),
    (768, 20, 2048, 16, 3, 5, 2, 32, 75),
    (896, 20, 2048, 16, 3, 5, 2, 32, 87.5),
    (928, 20, 2048, 16, 2, 5, 2, 32, 90.625),
    (960, 20, 2048, 8, 2, 2, 2, 32, 93.75),
    (992, 20, 2048, 8, 2, 2, 2, 32, 96.875),
    (992, 32, 2048, 8, 2, 2, 2, 32, 96.875),
    (1000, 20, 2048, 8, 2, 2, 2, 32, 100),
    (1024, 20, 2048, 8, 2, 2, 2, 32, 100),
    (1024, 32, 2048, 8, 2, 2, 2, 32, 100),
    (1024, 56, 2048, 8, 1, 2, 2, 32, 50),
    (64, 20, 3072, 132, 42, 33, 32, 32, 100),
    (768, 20, 3072, 16, 3, 4, 2, 32, 75),
    (1024, 20, 3072, 8, 2, 2, 2, 32, 100),
    (128, 18, 4096, 132, 21, 26, 16, 32, 100),
    (128, 20, 4096, 132, 21, 26, 16, 32, 100),
    (256, 18, 4096, 100, 10, 20, 8, 32, 100),
    (256, 168, 4096, 8, 1, 1, 8, 32, 12.5),
    (512, 18, 4096, 64, 5, 12, 4, 32, 100),
    (736, 20, 4096, 32, 3, 6, 2, 32, 71.875),
    (768, 20, 4096, 32, 3, 6, 2, 32, 75),
    (896, 20, 4096, 32, 3, 6, 2, 32, 87.5),
    (928, 20, 4096, 16, 2, 3, 2, 32, 90.625),
    (960, 20, 4096, 16, 2, 3, 2, 32, 93.75),
    (992, 20, 4096, 16, 2, 3, 2, 32, 96.875),
    (992, 32, 4096, 16, 2, 3, 2, 32, 96.875),
    (1000, 20, 4096, 16, 2, 3, 2, 32, 100),
    (1024, 20, 4096, 16, 2, 3, 2, 32, 100),
    (1024, 32, 4096, 16, 2, 3, 2, 32, 100),
    (1024, 56, 4096, 8, 1, 1, 2, 32, 50),
    (160, 20, 5120, 132, 16, 22, 12, 32, 93.75),
    (256, 20, 6144, 132, 10, 18, 8, 32, 100),
    (320, 20, 6144, 100, 8, 14, 6, 32, 93.75),
    (160, 20, 7168, 132, 16, 16, 12, 32, 93.75),
    (128, 32, 8192, 164, 16, 18, 16, 32, 100),
    (256, 168, 8192, 16, 1, 1, 8, 32, 12.5),
    (256, 255, 8192, 16, 1, 1, 8, 32, 12.5),
    (320, 20, 8192, 132, 8, 14, 6, 32, 93.75),
    (384, 20, 8192, 100, 7, 11, 5, 32, 93.75),
    (736, 20, 8192, 64, 3, 7, 2, 32, 71.875),
    (768, 20, 8192, 64, 3, 7, 2, 32, 75),
    (896, 20, 8192, 64, 3, 7, 2, 32, 87.5),
    (928, 20, 8192, 32, 2, 3, 2, 32, 90.625),
    (960, 20, 8192, 32, 2, 3, 2, 32, 93.75),
    (992, 20, 8192, 32, 2, 3, 2, 32, 96.875),
    (992, 32, 8192, 32, 2, 3, 2, 32, 96.875),
    (1000, 20, 8192, 32, 2, 3, 2, 32, 100),
    (1024, 20, 8192, 32, 2, 3, 2, 32, 100),
    (1024, 32, 8192, 32, 2, 3, 2, 32, 100),
    (1024, 56, 8192, 16, 1, 1, 2, 32, 50),
    (160, 20, 9216, 132, 16, 13, 12, 32, 93.75),
    (320, 20, 10240, 132, 8, 12, 6, 32, 93.75),
    (160, 20, 12288, 164, 16, 12, 12, 32, 93.75),
    (512, 20, 12288, 132, 5, 10, 4, 32, 100),
    (768, 20, 12288, 64, 3, 4, 2, 32, 75),
    (320, 20, 14336, 132, 8, 8, 6, 32, 93.75),
    (32, 20, 16384, 228, 84, 13, 64, 32, 20.3125),
    (160, 20, 16384, 228, 16, 13, 12, 32, 93.75),
    (768, 20, 16384, 100, 3, 5, 2, 32, 75),
    (64, 20, 20480, 228, 42, 10, 32, 32, 31.25),
    (1024, 20, 20480, 64, 2, 3, 2, 32, 100),
    (128, 18, 24000, 228, 21, 9, 16, 32, 56.25),
    (256, 18, 24000, 196, 10, 8, 8, 32, 100),
    (512, 18, 24000, 132, 5, 5, 4, 32, 100),
    (128, 20, 24576, 228, 21, 9, 16, 32, 56.25),
    (1024, 20, 24576, 64, 2, 2, 2, 32, 100),
    (256, 20, 28672, 228, 10, 7, 8, 32, 87.5),
    (768, 20, 28672, 132, 3, 4, 2, 32, 75),
    (384, 20, 32768, 196, 7, 5, 5, 32, 93.75),
    (128, 56, 33792, 228, 9, 6, 16, 32, 37.5),
    (256, 255, 33792, 64, 1, 1, 8, 32, 12.5),
    (512, 20, 33792, 164, 5, 4, 4, 32, 100),
    (32, 20, 40960, 228, 84, 5, 64, 32, 7.8125),
    (768, 20, 40960, 132, 3, 3, 2, 32, 75),
    (1024, 20, 40960, 100, 2, 2, 2, 32, 100),
    (128, 18, 48000, 196, 21, 4, 16, 32, 25),
    (256, 18, 48000, 196, 10, 4, 8, 32, 50),
    (512, 18, 48000, 196, 5, 4, 4, 32, 100),
    (64, 20, 49152, 196, 42, 4, 32, 32, 12.5),
    (768, 20, 49152, 132, 3, 2, 2, 32, 75),
    (1024, 20, 49152, 100, 2, 2, 2, 32, 100),
    (128, 20, 57344, 228, 21, 4, 16, 32, 25),
    (128, 96, 65536, 196, 5, 3, 16, 32, 18.75),
    (256, 20, 65536, 196, 10, 3, 8, 32, 37.5),
    (256, 32, 65536, 196, 8, 3, 8, 32, 37.5),
    (384, 20, 81920, 164, 7, 2, 5, 32, 37.5),
    (1024, 20, 81920, 164, 2, 2, 2, 32, 100),
    (512, 20, 102400, 228, 5, 2, 4, 32, 50),
    (768, 20, 102400, 228, 3, 2, 2, 32, 75),
    (32, 20, 116736, 132, 84, 1, 64, 32, 1.5625),
    (768, 20, 116736, 132, 3, 1, 2, 32, 37.5),
    (64, 20, 135168, 164, 42, 1, 32, 32, 3.125),
    (1024, 20, 135168, 164, 2, 1, 2, 32, 50),
    (128, 20, 153600, 164, 21, 1, 16, 32, 6.25),
    (1024, 20, 153600, 164, 2, 1, 2, 32, 50),
    (256, 20, 167936, 196, 10, 1, 8, 32, 12.5),
    (768, 20, 167936, 196, 3, 1, 2, 32, 37.5),
    (384, 20, 184320, 196, 7, 1, 5, 32, 18.75),
    (512, 20, 204800, 228, 5, 1, 4, 32, 25),
    (32, 20, 220160, 228, 84, 1, 64, 32, 1.5625),
    (768, 20, 220160, 228, 3, 1, 2, 32, 37.5),
    (1024, 20, 220160, 228, 2, 1, 2, 32, 50),
    (64, 20, 231424, 228, 42, 1, 32, 32, 3.125),
    (768, 20, 231424, 228, 3, 1, 2, 32, 37.5),
    (1024, 20, 231424, 228, 2, 1, 2, 32, 50),
]


@pytest.mark.parametrize(("bs", "regs", "smem", "cfg", "lr", "ls", "lw", "lb", "th"), H200_PROBE)
def test_h200_probe(bs, regs, smem, cfg, lr, ls, lw, lb, th) -> None:
    given = occupancy("9.0", bs, regs, smem, carveout=cfg * 1024)
    assert given.limits == {"registers": lr, "shared_mem": ls, "warps": lw, "blocks": lb}
    assert given.theoretical_pct == pytest.approx(th, abs=1e-9)
    predicted = occupancy("9.0", bs, regs, smem)
    assert predicted.shared_mem_config == cfg * 1024
    assert predicted.limits == given.limits


# The same probes with a carveout preference (cudaFuncAttributePreferredSharedMemoryCarveout,
# or a cache config: PreferL1 = 0, PreferEqual = 50, PreferShared = 100): block size,
# registers, static+dynamic shared memory, preference %, launch__shared_mem_config_size (KiB).
H200_PREFERENCE = [
    (64, 20, 0, 0, 32),
    (128, 20, 0, 0, 32),
    (256, 20, 0, 0, 32),
    (512, 20, 0, 0, 16),
    (1024, 20, 0, 0, 8),
    (128, 20, 2048, 0, 8),
    (1024, 20, 2048, 0, 8),
    (128, 20, 10240, 0, 16),
    (256, 20, 10240, 0, 16),
    (128, 20, 40960, 0, 64),
    (256, 20, 40960, 0, 64),
    (64, 20, 0, 5, 32),
    (256, 20, 0, 5, 32),
    (1024, 20, 0, 5, 16),
    (256, 20, 10240, 5, 16),
    (256, 20, 40960, 5, 64),
    (64, 20, 0, 10, 32),
    (256, 20, 0, 10, 32),
    (1024, 20, 0, 10, 32),
    (256, 20, 10240, 10, 32),
    (256, 20, 40960, 10, 64),
    (128, 20, 0, 20, 64),
    (512, 20, 0, 20, 64),
    (128, 20, 2048, 20, 100),
    (1024, 20, 2048, 20, 100),
    (128, 20, 10240, 20, 64),
    (128, 20, 40960, 20, 64),
    (64, 20, 0, 25, 64),
    (256, 20, 0, 25, 64),
    (1024, 20, 0, 25, 64),
    (256, 20, 10240, 25, 64),
    (256, 20, 40960, 25, 64),
    (64, 20, 0, 33, 100),
    (256, 20, 0, 33, 100),
    (1024, 20, 0, 33, 100),
    (256, 20, 10240, 33, 100),
    (256, 20, 40960, 33, 100),
    (128, 20, 0, 40, 100),
    (512, 20, 0, 40, 100),
    (128, 20, 2048, 40, 164),
    (1024, 20, 2048, 40, 164),
    (128, 20, 10240, 40, 100),
    (128, 20, 40960, 40, 100),
    (64, 20, 0, 50, 132),
    (256, 20, 0, 50, 132),
    (1024, 20, 0, 50, 132),
    (256, 20, 10240, 50, 132),
    (256, 20, 40960, 50, 132),
    (128, 20, 0, 60, 164),
    (512, 20, 0, 60, 164),
    (128, 20, 2048, 60, 228),
    (1024, 20, 2048, 60, 228),
    (128, 20, 10240, 60, 164),
    (128, 20, 40960, 60, 164),
    (64, 20, 0, 66, 164),
    (128, 20, 0, 66, 164),
    (256, 20, 0, 66, 164),
    (512, 20, 0, 66, 164),
    (1024, 20, 0, 66, 164),
    (128, 20, 2048, 66, 228),
    (1024, 20, 2048, 66, 228),
    (128, 20, 10240, 66, 196),
    (256, 20, 10240, 66, 196),
    (128, 20, 40960, 66, 164),
    (256, 20, 40960, 66, 164),
    (128, 20, 0, 70, 164),
    (512, 20, 0, 70, 164),
    (128, 20, 2048, 70, 228),
    (1024, 20, 2048, 70, 228),
    (128, 20, 10240, 70, 196),
    (128, 20, 40960, 70, 164),
    (64, 20, 0, 75, 196),
    (256, 20, 0, 75, 196),
    (1024, 20, 0, 75, 196),
    (256, 20, 10240, 75, 196),
    (256, 20, 40960, 75, 196),
    (128, 20, 0, 80, 196),
    (512, 20, 0, 80, 196),
    (128, 20, 2048, 80, 228),
    (1024, 20, 2048, 80, 228),
    (128, 20, 10240, 80, 228),
    (128, 20, 40960, 80, 196),
    (128, 20, 0, 90, 228),
    (512, 20, 0, 90, 228),
    (128, 20, 2048, 90, 228),
    (1024, 20, 2048, 90, 228),
    (128, 20, 10240, 90, 228),
    (128, 20, 40960, 90, 228),
    (64, 20, 0, 100, 228),
    (256, 20, 0, 100, 228),
    (1024, 20, 0, 100, 228),
    (256, 20, 10240, 100, 228),
    (256, 20, 40960, 100, 228),
]


@pytest.mark.parametrize(("bs", "regs", "smem", "pct", "cfg"), H200_PREFERENCE)
def test_h200_carveout_preference(bs, regs, smem, pct, cfg) -> None:
    r = occupancy("9.0", bs, regs, smem, preferred_carveout_pct=pct)
    assert r.shared_mem_config == cfg * 1024


def test_hand_computed_hopper() -> None:
    r = occupancy("9.0", 256, 40, 0)
    # 40 x 32 = 1280 registers per warp; 16384 per sub-partition hold 12 warps -> 48 warps.
    assert r.registers_per_warp == 1280
    assert r.limits == {"registers": 6, "shared_mem": 32, "warps": 8, "blocks": 32}
    assert r.limiters == ("registers",)
    assert (r.active_blocks_per_sm, r.active_warps_per_sm) == (6, 48)
    assert r.theoretical_pct == 75.0
    d = r.to_dict()
    assert d["limiter"] == "registers" and d["limits"]["warps"] == 8


def test_register_granularity_and_partial_warps() -> None:
    r = occupancy("9.0", 100, 18, 0)
    assert r.warps_per_block == 4
    assert r.registers_per_warp == 768  # 18 x 32 = 576, rounded up to 256s
    assert r.limits["registers"] == 21
    assert r.theoretical_pct == 100.0


def test_ties_are_all_listed() -> None:
    r = occupancy("9.0", 256, 32, 0)
    assert r.limiters == ("registers", "warps")
    assert r.limiter == "registers+warps"


def test_launch_that_cannot_run() -> None:
    r = occupancy("9.0", 512, 168, 0)  # 168 x 512 registers > 64 K per block
    assert r.limits["registers"] == 0 and not r.can_launch
    assert r.theoretical_pct == 0.0 and r.warnings
    too_much = occupancy("9.0", 128, 32, 228 * 1024)  # over the 227 KiB opt-in maximum
    assert too_much.limits["shared_mem"] == 0


def test_other_architectures() -> None:
    # Ampere GA10x: 48 warps, 16 blocks, 100 KiB.
    r = occupancy("8.6", 128, 32, 0)
    assert r.max_warps_per_sm == 48
    assert r.limits == {"registers": 16, "shared_mem": r.limits["shared_mem"], "warps": 12,
                        "blocks": 16}
    assert r.theoretical_pct == 100.0
    # Turing: 32 warps, 16 blocks, 64 KiB, 256-byte shared-memory unit, nothing reserved.
    t = occupancy("7.5", 64, 32, 1000, carveout=32 * 1024)
    assert t.shared_mem_per_block_allocated == 1024
    assert t.limits == {"registers": 32, "shared_mem": 32, "warps": 16, "blocks": 16}
    # Volta without shared memory: shared memory is not a limiter.
    v = occupancy("7.0", 1024, 16, 0)
    assert "shared_mem" not in v.limiters and v.theoretical_pct == 100.0
    # Ada: 24 blocks per SM.
    assert occupancy("8.9", 32, 16, 0).limits["blocks"] == 24


def test_every_table_row_is_consistent() -> None:
    for cc, spec in ARCH_SPECS.items():
        assert normalize_cc(cc) == cc
        assert spec.shared_mem_carveouts[-1] == spec.shared_mem_per_sm
        assert spec.max_shared_mem_per_block_optin + spec.reserved_shared_mem_per_block \
            == spec.shared_mem_per_sm or spec.reserved_shared_mem_per_block == 0
        assert spec.reserved_shared_mem_per_block == (1024 if float(cc) >= 8.0 else 0)
        assert list(spec.shared_mem_carveouts) == sorted(spec.shared_mem_carveouts)
    assert [c // 1024 for c in arch_spec("9.0").shared_mem_carveouts] == \
        [0, 8, 16, 32, 64, 100, 132, 164, 196, 228]
    assert [c // 1024 for c in arch_spec("7.5").shared_mem_carveouts] == [32, 64]


@pytest.mark.parametrize(("text", "cc"), [("9.0", "9.0"), ("sm_90", "9.0"), ("90", "9.0"),
                                          ("12.0", "12.0"), ("sm_120", "12.0"), ("8", "8.0")])
def test_cc_spellings(text: str, cc: str) -> None:
    assert normalize_cc(text) == cc


def test_unknown_cc() -> None:
    with pytest.raises(NcuAdviseError, match="unknown compute capability 6.1"):
        occupancy("6.1", 128, 32)
    with pytest.raises(NcuAdviseError, match="not a compute capability"):
        arch_spec("hopper")


def test_best_block_size_prefers_the_larger_block_on_a_tie() -> None:
    # 32 registers: 1024 threads already fill the SM (2 blocks), the search stops there.
    assert best_block_size("9.0", 32).block_size == 1024
    # 40 registers: 48 of 64 warps at best; 768 (2 blocks) ties with 384, 192, ... and wins.
    s = best_block_size("9.0", 40, sm_count=132)
    assert (s.block_size, s.blocks_per_sm, s.theoretical_pct) == (768, 2, 75.0)
    assert s.min_grid_size == 264
    assert best_block_size("9.0", 40, max_block=500).block_size == 384


def test_best_block_size_with_shared_memory_per_thread() -> None:
    # 64 bytes per thread: 1024 threads take 65 KiB (3 blocks -> 1 with the 64-warp cap).
    s = best_block_size("9.0", 32, lambda bs: 64 * bs)
    assert s.theoretical_pct == 100.0
    assert s.block_size == 1024
    # A kernel that needs 100 KiB per block gets 2 blocks; the largest block still wins.
    big = best_block_size("9.0", 32, 100 * 1024)
    assert (big.block_size, big.blocks_per_sm) == (1024, 2)


def test_what_ifs() -> None:
    base = occupancy("9.0", 256, 40, 0)
    assert fewer_registers(base, 8).theoretical_pct == 100.0
    assert what_if(base, block_size=128).limits["warps"] == 16
    assert registers_for_more_blocks(base) == 32
    assert shared_mem_for_more_blocks(base) is None
    smem = occupancy("9.0", 128, 32, 40 * 1024)
    assert smem.limiters == ("shared_mem",)
    more = shared_mem_for_more_blocks(smem)
    assert occupancy("9.0", 128, 32, more).active_blocks_per_sm == smem.active_blocks_per_sm + 1


def test_carveout_preference_and_snapping() -> None:
    spec = arch_spec("9.0")
    # A preference below one block is overridden by the smallest carveout that holds one.
    assert predict_shared_mem_config(spec, 256, 8, 41 * 1024, 0) == 64 * 1024
    assert predict_shared_mem_config(spec, 256, 8, 11 * 1024, 50) == 132 * 1024
    with pytest.raises(NcuAdviseError):
        predict_shared_mem_config(spec, 256, 8, 1024, 101)
    # "32.77 Kbyte" in an auto-units export is 32 KiB.
    assert snap_carveout(spec, 32770.0) == 32 * 1024
    assert snap_carveout(spec, 50000.0) == 50000


def test_report_table_columns() -> None:
    table = occupancy_from_report(read_cached(SAMPLES / "forms" / "torch_mlp.live.nvtx.csv.gz"))
    for col in ("calc_theoretical_pct", "calc_limiter", "recommended_block_size",
                "what_if_fewer_regs_pct", "sm__warps_active.avg.pct_of_peak_sustained_active",
                "ncu_limiter", "matches_ncu"):
        assert col in table.columns
    gemm = table.loc[3]  # cuBLAS: 255 registers, 33 KiB dynamic shared memory, 132 KiB carveout
    assert (gemm["calc_limiter"], gemm["shared_mem_config"]) == ("registers", 132 * 1024)
    assert gemm["ncu_limiter"] == "registers"


def test_report_without_occupancy_metrics() -> None:
    table = occupancy_from_report(read_cached(SAMPLES / "forms" / "forms_app.live.metrics.csv"))
    assert len(table) == 9 and table["calc_theoretical_pct"].isna().all()


@pytest.mark.parametrize("name", ["torch_mlp.live.nvtx.csv.gz", "forms_app.live.metrics.csv"])
def test_launch_entries_are_built_complete_in_one_place(name: str) -> None:
    """Every launch's JSON occupancy entry has every key, ncu's values beside the calculator's."""
    analysis = analysis_cached(SAMPLES / "forms" / name)
    table = occupancy_from_report(analysis.report)
    entries, shapes = launch_occupancy(analysis.report, analysis.quantities)
    assert entries == analysis.occupancy and shapes == analysis.launch_shapes
    keys = {tuple(entry) for entry in entries.values()}
    assert keys == {("theoretical_pct", "achieved_pct", "limiter", "limits",
                     "registers_per_thread", "shared_mem_per_block", "block_size", "waves_per_sm",
                     "calc_theoretical_pct", "recommended_block_size",
                     "what_if_fewer_registers_pct", "calc_limiter")}
    for launch, entry in entries.items():
        row = table.loc[launch]
        assert entry["limiter"] == row["ncu_limiter"]
        assert entry["calc_limiter"] == (row["calc_limiter"] if isinstance(row["calc_limiter"], str)
                                         else None)
        for key, column in (("calc_theoretical_pct", "calc_theoretical_pct"),
                            ("what_if_fewer_registers_pct", "what_if_fewer_regs_pct")):
            assert (entry[key] is None) == pd.isna(row[column])
            if entry[key] is not None:
                assert entry[key] == row[column]
    measured = [e for e in entries.values() if e["calc_theoretical_pct"] is not None]
    assert len(measured) == (8 if name.startswith("torch_mlp") else 0)


# ---------------------------------------------------------------------------------------------
# The command


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("occupancy")(occupancy_command)

    @app.callback()
    def main() -> None:
        """Test app."""

    return app


def _run(*args: str):
    return CliRunner().invoke(_app(), ["occupancy", *args])


def test_command_text_fits_80_columns() -> None:
    res = _run("--cc", "9.0", "--block-size", "256", "--registers", "40")
    assert res.exit_code == 0, res.output
    assert "Theoretical occupancy    75.0 %" in res.output
    assert "registers         6 limiter" in res.output
    assert "Recommended block size  768 threads" in res.output
    assert "With 8 fewer registers  100.0 %" in res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80


def test_command_json() -> None:
    import json

    res = _run("--cc", "sm_90", "--block-size", "128", "--registers", "255",
               "--shared-mem", "33792", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["theoretical_pct"] == 12.5
    assert data["limits"] == {"registers": 2, "shared_mem": 3, "warps": 16, "blocks": 32}
    assert data["limiter"] == "registers"
    assert data["recommended_block_size"] == 256
    assert data["what_if"]["registers_per_thread"] == 247


@pytest.mark.parametrize(("args", "message"), [
    (["--cc", "6.1", "--block-size", "128", "--registers", "32"], "unknown compute capability"),
    (["--cc", "9.0", "--block-size", "2048", "--registers", "32"], "block size must be"),
    (["--cc", "9.0", "--block-size", "0", "--registers", "32"], "block size must be"),
    (["--cc", "9.0", "--block-size", "128", "--registers", "256"], "registers per thread"),
    (["--cc", "8.6", "--block-size", "128", "--registers", "32", "--shared-mem", "102400"],
     "shared memory per block"),
])
def test_command_rejects_bad_input(args: list[str], message: str) -> None:
    res = _run(*args)
    assert res.exit_code != 0
    assert isinstance(res.exception, NcuAdviseError)
    assert message in str(res.exception) and "\n" not in str(res.exception)


def test_check_launch_inputs_accepts_the_limits() -> None:
    assert check_launch_inputs("9.0", 1024, 255, 227 * 1024).cc == "9.0"
    assert calculator_summary("9.0", 1024, 255, 0)["theoretical_pct"] == 0.0


@pytest.mark.parametrize(("text", "cc", "warps"), [("sm_103", "10.3", 64), ("sm_110", "11.0", 48),
                                                   ("sm_121", "12.1", 48)])
def test_the_newer_blackwell_capabilities(text: str, cc: str, warps: int) -> None:
    """ncu 2025-2026 profiles 10.3 (B300), 11.0 (Thor) and 12.1 (GB10): no unknown cc."""
    assert normalize_cc(text) == cc
    result = occupancy(text, 512, 32, 0)
    assert result.max_warps_per_sm == warps and result.theoretical_pct == 100.0


# NVIDIA CCCL, libcudacxx/include/cuda/__device/arch_traits.h (cuda::arch_traits<sm_X>, at
# 571f2fc, 2026-08): threads per SM, blocks per SM, shared memory per SM (KiB); the opt-in
# per block is that less the 1 KiB the driver reserves. 11.0 was 64 warps, 32 blocks here.
_CCCL_TRAITS = {"10.0": (2048, 32, 228), "10.3": (2048, 32, 228), "11.0": (1536, 24, 228),
                "12.0": (1536, 24, 100), "12.1": (1536, 24, 100)}


@pytest.mark.parametrize("cc", sorted(_CCCL_TRAITS))
def test_blackwell_limits_are_nvidias(cc: str) -> None:
    from ncu_advisor.derive.gpu_specs import KIB, arch_spec

    threads, blocks, smem_kib = _CCCL_TRAITS[cc]
    spec = arch_spec(cc)
    assert (spec.max_threads_per_sm, spec.max_blocks_per_sm) == (threads, blocks)
    assert spec.shared_mem_per_sm == smem_kib * KIB
    assert spec.max_shared_mem_per_block_optin == (smem_kib - 1) * KIB
    assert spec.reserved_shared_mem_per_block == KIB and spec.registers_per_sm == 64 * KIB
