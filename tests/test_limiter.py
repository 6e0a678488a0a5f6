"""One limiter per launch (derive/limiter.py): the rules of the order, and real captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import analysis_cached

from ncu_advisor.derive.limiter import Limiter, limiter_of

CORPUS = Path(__file__).resolve().parent.parent / "sample_reports" / "corpus"


@pytest.mark.parametrize("quantities, kind, unit", [
    ({"duration_ns": 3000, "dram_pct": 90}, "launch-overhead", "launch overhead"),
    ({"duration_ns": 9e5, "dram_pct": 86, "l2_pct": 70, "sm_pct": 20}, "memory", "DRAM"),
    ({"duration_ns": 9e5, "xu_pipe_pct": 97, "dram_pct": 3}, "pipe", "XU pipe"),
    ({"duration_ns": 9e5, "issue_active": 0.9, "fma_pipe_pct": 40}, "issue", "issue slots"),
    ({"duration_ns": 9e5, "sm_pct": 85, "mem_pct": 20}, "pipe", "compute (SOL)"),
    ({"duration_ns": 9e5, "dram_pct": 10, "grid_size": 8, "sm_count": 132}, "launch-shape",
     "idle SMs"),
    ({"duration_ns": 9e5, "dram_pct": 10, "grid_size": 200, "sm_count": 132,
      "waves_per_sm": 0.4}, "launch-shape", "less than one wave"),
    # a saturated unit names the limit even in a small grid (ncu would say Small Grid)
    ({"duration_ns": 9e5, "l1_pct": 99, "grid_size": 64, "sm_count": 132}, "memory",
     "L1/shared"),
    ({"duration_ns": 9e5, "dram_pct": 20, "achieved_occupancy_pct": 12}, "latency",
     "too few warps"),
    ({"duration_ns": 9e5, "dram_pct": 20, "achieved_occupancy_pct": 80,
      "stall_long_scoreboard": 30, "stall_mio_throttle": 2}, "latency",
     "long scoreboard (waiting on L1TEX: global/local memory) stalls"),
    # a stall under 30% of the cycles between issues is not dominant (ncu's CPIStall threshold)
    ({"duration_ns": 9e5, "dram_pct": 20, "achieved_occupancy_pct": 80, "cycles_per_issue": 33,
      "stall_long_scoreboard": 9.4, "stall_mio_throttle": 1.4}, "latency",
     "latency (no dominant stall)"),
    ({"duration_ns": 9e5, "dram_pct": 20, "achieved_occupancy_pct": 80, "cycles_per_issue": 33},
     "latency", "latency (no dominant stall)"),
    ({}, "unknown", "not measured"),
])
def test_the_order_of_the_diagnosis(quantities, kind, unit):
    limiter = limiter_of(quantities)
    assert (limiter.kind, limiter.unit) == (kind, unit)
    if limiter.utilization_pct is not None and limiter.headroom_pct is not None:
        assert limiter.utilization_pct + limiter.headroom_pct == pytest.approx(100.0)


def test_labels_fit_a_table_column():
    for limiter in (Limiter("memory", "L1/shared", 99.4), Limiter("issue", "issue slots", 79),
                    Limiter("latency", "too few warps"), Limiter("launch-shape", "idle SMs")):
        assert len(limiter.label) <= 13
    assert Limiter("memory", "DRAM", 86.2).label == "DRAM 86%"


@pytest.mark.parametrize("capture, launch, kind, unit", [
    ("cuda_compute_patterns.raw.csv.xz", 2, "launch-shape", "idle SMs"),  # axpy on 8 blocks
    ("cuda_compute_patterns.raw.csv.xz", 5, "pipe", "XU pipe"),  # __sinf/__expf loop
    ("cuda_compute_patterns.raw.csv.xz", 12, "latency", "too few warps"),  # 96 KB smem/block
    ("cuda_memory_access.raw.csv.xz", 7, "memory", "L1/shared"),  # a thread walks its row
    ("torch_decode_b1.raw.csv.xz", 3, "launch-overhead", "launch overhead"),  # 3.7 us
])
def test_limiters_of_real_launches(capture, launch, kind, unit):
    limiter = analysis_cached(CORPUS / capture).limiters[launch]
    assert (limiter.kind, limiter.unit) == (kind, unit)


@pytest.mark.parametrize("name", ["cuda_compute_patterns", "cuda_memory_access",
                                  "triton_user_kernels", "torch_kv_decode",
                                  "torch_decoder_train", "torch_library_ops"])
def test_the_same_limiter_from_the_raw_and_the_details_page(name):
    """The same kind from both; the same unit, unless the details page lacks that unit's
    metric (no per-pipe utilization): then it names the speed-of-light total instead."""
    raw = analysis_cached(CORPUS / f"{name}.raw.csv.xz").limiters
    details = analysis_cached(CORPUS / f"{name}.details.csv.xz").limiters
    assert raw.keys() == details.keys()
    for launch, limiter in raw.items():
        other = details[launch]
        assert other.kind == limiter.kind, launch
        assert other.unit == limiter.unit or other.unit.endswith("(SOL)"), launch


def test_every_launch_has_one_in_the_json_and_the_text(capsys):
    analysis = analysis_cached(CORPUS / "cuda_transpose.raw.csv.xz")
    doc = analysis.to_dict()
    assert all(k["limiter"]["kind"] != "unknown" for k in doc["kernels"])
    from ncu_advisor.render.text import render_text

    table = render_text(doc, width=100)
    assert "limiter" in table and "L2 85%" in table
