"""Roofline position of real launches: bounds, intensity, peaks from the report or the table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import analysis_cached, read_cached

from ncu_advisor import analyze, read_report

ROOT = Path(__file__).resolve().parent.parent
DEMOS = ROOT / "sample_reports" / "demos"


def demo_rooflines(name: str) -> dict[str, dict]:
    result = analysis_cached([DEMOS / f"{name}.raw.csv", DEMOS / f"{name}.details.csv"])
    names = result.report.launches["short_name"]
    return {names[i]: r.to_dict() for i, r in result.rooflines.items()}


@pytest.mark.parametrize(("demo", "kernel", "bound"), [
    ("roofline", "roofline_memory_bound_axpb", "memory"),
    ("roofline", "roofline_compute_bound_poly", "compute"),
    ("tiling", "tiling_smem_matmul", "memory"),  # L1/shared traffic is the busiest unit
    ("fast-math", "fast_math_accurate_trig", "compute"),
    ("privatization", "privatization_global_atomic_hist", "latency"),
    ("launch-config", "launch_config_tiny_grid_scale", "latency"),
    ("coalescing", "coalescing_contiguous_copy", "memory"),
])
def test_bound_of_demo_kernels(demo, kernel, bound):
    assert demo_rooflines(demo)[kernel]["bound"] == bound


def test_intensity_peaks_and_ridge_from_the_report():
    r = demo_rooflines("roofline")
    mem, comp = r["roofline_memory_bound_axpb"], r["roofline_compute_bound_poly"]
    # y = 0.999 x + 0.001 in closed form: 2 FLOP per 8 bytes moved; the polynomial does 256 FMAs.
    assert mem["arithmetic_intensity"] == pytest.approx(0.25, rel=0.1)
    assert comp["arithmetic_intensity"] > comp["ridge_point"] > mem["arithmetic_intensity"]
    # H200 peaks by ncu's own formulas: ~66 TFLOP/s FP32, ~4.8 TB/s DRAM, ridge ~14 FLOP/byte.
    assert comp["peaks"]["fp32"] == pytest.approx(66e12, rel=0.05)
    assert comp["peaks"]["fp64"] == pytest.approx(comp["peaks"]["fp32"] / 2, rel=0.01)
    assert comp["peaks"]["tensor"] == pytest.approx(1.0e15, rel=0.1)  # dense FP16
    assert comp["peak_bandwidth"] == pytest.approx(4.8e12, rel=0.05)
    assert comp["ridge_point"] == pytest.approx(13.8, rel=0.05)
    assert comp["achieved_flops"] == pytest.approx(58.5e12, rel=0.1)  # 88% of the FP32 roof
    assert comp["peak_source"] == "report"
    assert set(comp["levels"]) == {"dram", "l2", "l1"}
    assert comp["levels"]["l1"]["peak_bandwidth"] > comp["levels"]["l2"]["peak_bandwidth"]


def test_basic_set_has_bounds_but_no_peaks():
    result = analysis_cached(ROOT / "sample_reports/forms/forms_app.live.basic.csv")
    r = result.rooflines[1].to_dict()  # copy_strided
    assert r["bound"] == "memory"
    assert r["peak_flops"] is None and "peaks" in r["missing"]
    assert "flops" in r["missing"]


def test_datasheet_table_when_the_report_has_no_peaks():
    report = read_report(ROOT / "sample_reports/forms/forms_app.live.basic.csv")
    report.session["gpu"] = "NVIDIA H200"  # a details export does not name the GPU
    r = analyze(report).rooflines[0].to_dict()
    assert r["peak_source"] == "datasheet table (NVIDIA H200)"
    assert r["peak_bandwidth"] == 4.8e12


def test_measured_bandwidth_is_shown_beside_the_peak():
    report = read_cached(ROOT / "sample_reports/forms/forms_app.ncu-rep.gz")
    r = analyze(report, measured_bandwidth=4.214e12).rooflines[0].to_dict()
    assert r["measured_bandwidth"] == 4.214e12 and r["peak_bandwidth"] > r["measured_bandwidth"]


def test_the_tensor_core_saving_is_the_larger_of_the_compute_and_memory_floors():
    # An FP32 SGEMM at 70% of the FMA peak: on an H200 (TF32 7.4x FP32, 60% of it reached)
    # its work takes 16% of the time; on an L4-class part (2x) 58%; at 80% of DRAM the bytes
    # alone take 89%; a 3 us GEMM cannot go under 2.5 us.
    from ncu_advisor.derive.quantities import tensor_core_saving_pct

    def saving(fp32, dram, ns, cc):
        return float(tensor_core_saving_pct(pd.Series([fp32]), pd.Series([dram]),
                                            pd.Series([ns]), pd.Series([cc])).iloc[0])
    assert saving(70.0, 5.0, 100_000.0, "9.0") == pytest.approx(84.2, abs=0.1)
    assert saving(70.0, 5.0, 100_000.0, "8.9") == pytest.approx(41.7, abs=0.1)
    assert saving(70.0, 80.0, 100_000.0, "9.0") == pytest.approx(11.1, abs=0.1)
    assert saving(70.0, 5.0, 3_000.0, "9.0") == pytest.approx(16.7, abs=0.1)
    assert saving(10.0, 1.0, 100_000.0, "9.0") == 90.0  # capped
