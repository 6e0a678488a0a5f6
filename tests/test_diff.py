"""``diff``: pairing launches across two real captures, time and finding changes, noise, gates.

Real inputs: the TF32 before/after of a PyTorch MLP step (cuBLAS swaps its FFMA GEMM for a TF32
kernel with another name), a plain repeat of the before run (noise), and the demos' bad and good
variants exported from one capture each. Small launch tables made here test the pairing rules
on their own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import ncu_advisor
from ncu_advisor.cli import main
from ncu_advisor.diff.compare import (
    DEFAULT_NOISE_FLOOR_NS,
    NOISE_MARGIN,
    diff_runs,
    evaluate_gates,
    kernel_role,
    pair_launches,
)
from ncu_advisor.report import LAUNCH_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
FOREIGN = ROOT / "sample_reports" / "foreign"
DEMOS = ROOT / "sample_reports" / "demos_lineinfo"
FFMA_GEMM = ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_"
             "aligna4_alignc4_execute_kernel__5x_cublas")
TF32_GEMM_1 = ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_"
               "execute_segment_k_on_kernel__5x_cublas")
TF32_GEMM_2 = ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_"
               "execute_segment_k_off_kernel__5x_cublas")


def _run(name: str) -> ncu_advisor.Analysis:
    return ncu_advisor.analyze(ncu_advisor.read_report(FOREIGN / f"{name}.raw.csv.gz"))


@pytest.fixture(scope="module")
def tf32():
    """The three TF32 captures, each read and analyzed once."""
    return {n: _run(f"torch_tf32_{n}") for n in ("off", "off_repeat", "on")}


@pytest.fixture(scope="module")
def off_on(tf32):
    return diff_runs(tf32["off"], tf32["on"]).to_dict()


def _names(pair: dict) -> tuple[str | None, str | None]:
    return tuple(None if pair[s] is None else pair[s]["name"] for s in ("before", "after"))


# --- the TF32 before/after ---------------------------------------------------------------


def test_tf32_pairs_the_renamed_cublas_kernels_in_order(off_on):
    pairs = off_on["pairs"]
    assert [p["match"] for p in pairs] == ["renamed", "exact", "renamed", "exact", "exact"]
    # Both FFMA GEMMs have one name; each pairs with the TF32 kernel in its own place.
    assert _names(pairs[0]) == (FFMA_GEMM, TF32_GEMM_1)
    assert _names(pairs[2]) == (FFMA_GEMM, TF32_GEMM_2)
    assert pairs[0]["before"]["grid"] == [32, 32, 1] and pairs[0]["after"]["grid"] == [120, 1, 1]
    assert pairs[2]["before"]["grid"] == [32, 8, 1] and pairs[2]["after"]["grid"] == [132, 1, 1]
    assert [p["before"]["id"] for p in pairs] == [0, 1, 2, 3, 4]
    assert [p["after"]["id"] for p in pairs] == [0, 1, 2, 3, 4]
    assert off_on["match_counts"] == {"exact": 3, "reshaped": 0, "renamed": 2, "position": 0,
                                      "new": 0, "gone": 0}


def test_tf32_times_and_speedups(off_on):
    assert off_on["before"]["total_ns"] == 6835584.0
    assert off_on["after"]["total_ns"] == 1074112.0
    assert off_on["speedup"] == pytest.approx(6.3640, abs=1e-4)
    first, second = off_on["pairs"][0], off_on["pairs"][2]
    assert (first["before_ns"], first["after_ns"]) == (5385472.0, 799488.0)
    assert first["speedup"] == pytest.approx(6.736, abs=1e-3)
    assert (second["before_ns"], second["after_ns"]) == (1358016.0, 180896.0)
    assert second["speedup"] == pytest.approx(7.507, abs=1e-3)
    assert [p["verdict"] for p in off_on["pairs"]] == ["faster", "noise", "faster", "noise",
                                                       "noise"]
    # The elementwise kernels moved by < 1 us: inside the 1 us floor.
    assert off_on["pairs"][1]["delta_ns"] == 768.0


def test_tf32_quantity_deltas_show_the_tensor_cores_taking_over(off_on):
    q = off_on["pairs"][0]["quantities"]
    assert q["flops_fp32"]["before"] == pytest.approx(2.749e11, rel=1e-3)
    assert q["flops_tensor"]["before"] == 0.0
    assert q["flops_tensor"]["after"] == pytest.approx(2.749e11, rel=1e-3)
    assert q["tensor_pipe_pct"]["after"] > q["tensor_pipe_pct"]["before"]
    assert q["dram_bytes"]["unit"] == "byte" and q["dram_bytes"]["delta"] < 0
    assert q["achieved_flops"]["after"] > 5 * q["achieved_flops"]["before"]
    assert off_on["pairs"][0]["roofline"]["before"]["precision"] == "fp32"
    assert off_on["pairs"][0]["roofline"]["after"]["precision"] == "tensor"


def test_tf32_findings_resolved_new_kept(off_on):
    f = off_on["findings"]
    resolved = {(x["rule"], x["kernel"]): x for x in f["resolved"]}
    fp32 = resolved[("precision.fp32-without-tensor-cores", FFMA_GEMM)]
    assert fp32["launches"] == 2 and fp32["category"] == "precision"
    assert fp32["before"]["ids"] == [0] and fp32["after"] is None
    assert {x["kernel"] for x in f["new"]} <= {TF32_GEMM_1, TF32_GEMM_2}
    kept = {x["rule"] for x in f["kept"]}
    # Application-level findings match by rule and a paired kernel: the hot spot survives the
    # kernel swap. The eager square -> mean run is kept and worsens: with the GEMMs faster
    # it holds a larger share of the step (low -> medium); nothing else worsens.
    assert {"roofline.hot-spots", "fusion.eager-chain"} <= kept
    assert all(x["status"] == "kept" for x in f["kept"])
    assert {x["rule"] for x in f["kept"] if x["worsened"]} == {"fusion.eager-chain"}


# --- noise ------------------------------------------------------------------------------------


def test_repeat_run_is_inside_the_noise(tf32):
    d = diff_runs(tf32["off"], tf32["off_repeat"]).to_dict()
    assert [p["match"] for p in d["pairs"]] == ["exact"] * 5
    assert all(p["within_noise"] for p in d["pairs"])
    assert d["within_noise"] is True
    # Measured: the total moved by 0.099%, the largest kernel by 0.12%, the 14 us reduction
    # by 2.7% (384 ns), within the 1 us floor.
    assert d["change_pct"] == pytest.approx(0.0988, abs=1e-4)
    pairs = d["pairs"]
    assert pairs[0]["change_pct"] == pytest.approx(0.1159, abs=1e-4)
    assert pairs[4]["change_pct"] == pytest.approx(2.7397, abs=1e-4)
    assert pairs[4]["noise_ns"] == DEFAULT_NOISE_FLOOR_NS
    assert d["findings"]["new"] == [] and d["findings"]["resolved"] == []
    assert d["noise"]["method"] == "default"


def test_noise_band_from_repeats(tf32):
    d = diff_runs(tf32["off"], tf32["on"], before_repeats=[tf32["off_repeat"]]).to_dict()
    noise = d["noise"]
    assert noise["method"] == "repeats"
    assert noise["observed"]["before"]["total_change_pct"] == pytest.approx(0.0988, abs=1e-4)
    assert noise["observed"]["before"]["max_kernel_change_pct"] == pytest.approx(2.7397, abs=1e-4)
    assert noise["total_pct"] == pytest.approx(NOISE_MARGIN * 0.0988, abs=1e-3)
    # The big GEMM's band: twice the 0.116% it moved between the repeats.
    assert d["pairs"][0]["noise_ns"] == pytest.approx(NOISE_MARGIN * 6240.0)
    assert d["before"]["repeats"][0]["total_ns"] == 6842336.0


def test_explicit_noise_band(tf32):
    d = diff_runs(tf32["off"], tf32["off_repeat"], noise_pct=0.05, noise_floor_ns=0).to_dict()
    verdicts = [p["verdict"] for p in d["pairs"]]
    assert verdicts[0] == "slower" and verdicts[4] == "slower"  # 0.12% and 2.7% > 0.05%
    assert d["noise"]["kernel_pct"] == 0.05


# --- gates ------------------------------------------------------------------------------------


def test_gates_pass_on_repeat_and_speedup_fail_on_reverse(tf32, off_on):
    repeat = diff_runs(tf32["off"], tf32["off_repeat"]).to_dict()
    for d in (repeat, off_on):
        gate, = evaluate_gates(d, fail_if_slower=0.0)
        assert gate.passed, gate.reason
    reverse = diff_runs(tf32["on"], tf32["off"]).to_dict()
    slower, new = evaluate_gates(reverse, fail_if_slower=5.0, fail_on_new="high")
    assert not slower.passed and "whole run +536.4%" in slower.reason
    assert not new.passed and "precision.fp32-without-tensor-cores" in new.reason
    assert evaluate_gates(repeat, fail_on_new="info")[0].passed


def test_kernel_gate_ignores_kernels_below_min_share(tf32):
    d = diff_runs(tf32["off"], tf32["off_repeat"], noise_pct=0, noise_floor_ns=0).to_dict()
    # The reduction (0.2% of the run) is 2.7% slower; the run itself 0.1%.
    assert evaluate_gates(d, fail_if_slower=1.0)[0].passed
    gate, = evaluate_gates(d, fail_if_slower=1.0, min_share_pct=0.1)
    assert not gate.passed and "reduce_kernel +2.7%" in gate.reason


# --- the demos' bad and good variants --------------------------------------------------------

DEMO_CASES = {
    # name: (before kernel, after kernel, speedup from the captures' durations, rule resolved)
    "coalescing": ("coalescing_strided_copy", "coalescing_contiguous_copy", 4843552 / 122880,
                   "coalescing.global-loads"),
    "tiling": ("tiling_naive_matmul", "tiling_smem_matmul", 2531936 / 572672,
               "tiling.no-on-chip-reuse"),
    "launch-config": ("launch_config_tiny_grid_scale", "launch_config_full_grid_scale",
                      619072 / 132128, "launch-config.small-grid"),
}


def _demo(name: str, variant: str) -> ncu_advisor.Analysis:
    path = next(DEMOS.glob(f"{name}.{variant}.raw.csv*"))
    return ncu_advisor.analyze(ncu_advisor.read_report(path))


@pytest.mark.parametrize("name", sorted(DEMO_CASES))
def test_demo_bad_vs_good(name):
    before, after, speedup, rule = DEMO_CASES[name]
    d = diff_runs(_demo(name, "bad"), _demo(name, "good")).to_dict()
    pair, = d["pairs"]
    assert pair["match"] == "renamed" and _names(pair) == (before, after)
    assert pair["speedup"] == pytest.approx(speedup) and d["speedup"] == pytest.approx(speedup)
    assert pair["verdict"] == "faster"
    assert rule in {f["rule"] for f in d["findings"]["resolved"]}


def test_fusion_three_kernels_become_one():
    d = diff_runs(_demo("fusion", "bad"), _demo("fusion", "good")).to_dict()
    assert [(p["match"], *_names(p)) for p in d["pairs"]] == [
        ("gone", "fusion_scale_shift", None),
        ("renamed", "fusion_relu", "fusion_fused_scale_relu_residual"),
        ("gone", "fusion_add_residual", None),
    ]
    assert d["speedup"] == pytest.approx((124896 + 123104 + 181664) / 124640)
    assert "fusion.memory-bound-chain" in {f["rule"] for f in d["findings"]["resolved"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(
    {p.name.split(".")[0] for p in DEMOS.glob("*.bad.raw.csv*")} - {"fusion", "math-rewrite"}))
def test_every_single_kernel_demo_pairs_by_rename(name):
    d = diff_runs(_demo(name, "bad"), _demo(name, "good")).to_dict()
    pair, = d["pairs"]
    assert pair["match"] == "renamed"
    assert d["findings"]["resolved"], "the bad variant's problem is resolved"


# --- pairing rules on small launch tables -----------------------------------------------------


def _launches(rows: list[tuple]) -> pd.DataFrame:
    """Launch tables: (name, grid_x, nvtx, stream) per launch."""
    records = []
    for i, (name, grid, nvtx, stream) in enumerate(rows):
        rec = dict.fromkeys(LAUNCH_COLUMNS)
        rec.update(launch=i, id=i, process_id=1, name=name, short_name=name, grid_x=grid,
                   grid_y=1, grid_z=1, block_x=256, block_y=1, block_z=1, stream=stream,
                   nvtx=nvtx, duration_ns=1000.0, invocations=1)
        records.append(rec)
    return pd.DataFrame.from_records(records, columns=LAUNCH_COLUMNS)


def _pairs(before, after):
    return [(p.before, p.after, p.match) for p in pair_launches(_launches(before),
                                                                 _launches(after))]


def test_repeated_launches_pair_in_order_and_extra_ones_are_new():
    before = [("k", 10, None, 7)] * 3
    after = [("k", 10, None, 7)] * 3 + [("k", 10, None, 7)]
    assert _pairs(before, after) == [(0, 0, "exact"), (1, 1, "exact"), (2, 2, "exact"),
                                     (None, 3, "new")]


def test_exact_reshaped_renamed_position_new_gone():
    before = [("init", 1, None, 7), ("scale_kernel", 64, None, 7), ("sgemm_128x64", 8, None, 7),
              ("foo", 4, None, 7), ("radix_sort", 2, None, 7), ("block_histogram", 1, None, 7)]
    after = [("init", 1, None, 7), ("scale_kernel", 128, None, 7),
             ("cutlass_tf32_gemm", 9, None, 7), ("bar", 4, None, 7), ("radix_sort", 2, None, 7),
             ("softmax_fwd", 1, None, 7)]
    assert _pairs(before, after) == [(0, 0, "exact"), (1, 1, "reshaped"), (2, 2, "renamed"),
                                     (3, 3, "position"), (4, 4, "exact"), (None, 5, "new"),
                                     (5, None, "gone")]


def test_different_roles_do_not_pair_by_position():
    assert _pairs([("radix_sort_pass", 1, None, 7)], [("gemm_tf32", 1, None, 7)]) == [
        (None, 0, "new"), (0, None, "gone")]


def test_lanes_by_nvtx_range_and_a_kernel_that_moved():
    before = [("a_kernel", 1, "fwd", 7), ("b_kernel", 1, "bwd", 7), ("c_kernel", 1, "fwd", 7)]
    after = [("b_kernel", 1, "bwd", 7), ("a_kernel", 1, "fwd", 7), ("c_kernel", 1, "opt", 7)]
    assert sorted(_pairs(before, after)) == [(0, 1, "exact"), (1, 0, "exact"), (2, 2, "exact")]


def test_streams_pair_by_order_of_first_use():
    before = [("x", 1, None, 7), ("y", 1, None, 13)]
    after = [("x", 1, None, 20), ("y", 1, None, 21)]
    assert _pairs(before, after) == [(0, 0, "exact"), (1, 1, "exact")]


@pytest.mark.parametrize(("name", "role"), [
    (FFMA_GEMM, "gemm"), (TF32_GEMM_1, "gemm"), ("tiling_naive_matmul", "gemm"),
    ("void at::native::reduce_kernel<512, 1>", "reduce"), ("cudnn::implicit_convolve_sgemm",
                                                           "conv"),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "attention"), ("mystery", None)])
def test_kernel_role(name, role):
    assert kernel_role(name) == role


# --- the command line -------------------------------------------------------------------------


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(["diff", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _capture_dir(tmp_path: Path, name: str) -> Path:
    """A folder holding the raw and details exports of one capture (read as one run)."""
    folder = tmp_path / name
    folder.mkdir()
    for form in ("raw", "details"):
        (folder / f"{name}.{form}.csv.gz").symlink_to(FOREIGN / f"{name}.{form}.csv.gz")
    return folder


def test_cli_folders_json_and_passing_gates(tmp_path, capsys):
    off, on = _capture_dir(tmp_path, "torch_tf32_off"), _capture_dir(tmp_path, "torch_tf32_on")
    code, out, err = _cli([str(off), str(on), "-f", "json", "--fail-if-slower", "5"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["schema_version"] == 1
    assert len(data["before"]["sources"]) == 2
    # A folder merges both exports; the launch times come from the details page, which prints
    # three significant digits (the raw page's total is 6,835,584 ns).
    assert data["before"]["total_ns"] == pytest.approx(6835584.0, rel=2e-3)
    assert data["speedup"] == pytest.approx(6.364, rel=2e-3)
    assert [p["match"] for p in data["pairs"]].count("renamed") == 2
    for p in data["pairs"]:
        assert set(p) >= {"before", "after", "before_ns", "after_ns", "speedup", "match"}
        assert set(p["before"]) >= {"id", "name"}
    assert set(data["findings"]) == {"resolved", "new", "kept"}
    assert data["gates"] == [{"gate": "fail-if-slower", "passed": True,
                              "reason": "nothing slower by more than 5% beyond noise"}]


def test_cli_text_and_failing_gate(tmp_path, capsys):
    on, off = FOREIGN / "torch_tf32_on.raw.csv.gz", FOREIGN / "torch_tf32_off.raw.csv.gz"
    code, out, err = _cli([str(on), str(off), "--fail-if-slower", "5"], capsys)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("ncu-advise: gate failed: --fail-if-slower")
    assert "whole run +536.4%" in err
    lines = out.splitlines()
    assert lines[0].startswith("ncu-advise diff: 1.07 ms -> 6.84 ms GPU time, 6.36x slower")
    table = lines[lines.index(next(ln for ln in lines if "verdict" in ln)) + 1:]
    assert "renamed" in table[0] and "sm90_xmma_gemm" in table[0]
    # A long name wraps in its column; the after name follows the before name.
    follow = [ln for ln in table[1:6] if ln.startswith(" " * 58)]
    assert any(ln.strip().startswith("-> sm80") for ln in follow)
    assert "New findings (1):" in out and "precision.fp32-without-tensor-cores" in out


def test_cli_html_is_self_contained_and_escaped(tmp_path, capsys):
    target = tmp_path / "diff.html"
    code, _, err = _cli([str(FOREIGN / "torch_tf32_off.raw.csv.gz"),
                         str(FOREIGN / "torch_tf32_off_repeat.raw.csv.gz"), "-f", "html", "-o",
                         str(target), "--fail-on-new", "info"], capsys)
    assert code == 0 and err == f"wrote {target}\n"
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script src" not in page
    assert "<link" not in page and "@import" not in page
    assert page.count('class="roofline"') == 1 and 'class="timechart"' in page
    # Template kernel names reach the page only escaped (roofline tooltips carry full names).
    assert "vectorized_elementwise_kernel&lt;4" in page
    assert "vectorized_elementwise_kernel<4" not in page
    assert "--fail-on-new</strong>: passed" in page


OFF_RAW = str(FOREIGN / "torch_tf32_off.raw.csv.gz")
ON_RAW = str(FOREIGN / "torch_tf32_on.raw.csv.gz")


@pytest.mark.parametrize(("args", "message"), [
    (["missing.csv", ON_RAW], "missing.csv: no such file or directory"),
    (["GENERATED", ON_RAW], "generated_garbage.csv"),
    ([OFF_RAW, ON_RAW, "--noise", "-1"], "--noise must be a percentage >= 0"),
    ([OFF_RAW, ON_RAW, "--fail-if-slower", "-3"], "--fail-if-slower must be a percentage"),
])
def test_cli_bad_input_exits_2_with_one_line(args, message, capsys, tmp_path):
    garbage = tmp_path / "generated_garbage.csv"
    garbage.write_text("this is not an Nsight Compute export\n1,2,3\n")
    args = [str(garbage) if a == "GENERATED" else a for a in args]
    target = tmp_path / "out.json"
    code, out, err = _cli([*args, "-f", "json", "-o", str(target)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ncu-advise: error: ") and message in err
    assert not target.exists()


def test_cli_unknown_severity_is_a_usage_error(capsys):
    code, out, err = _cli([OFF_RAW, ON_RAW, "--fail-on-new", "catastrophic"], capsys)
    assert code == 2 and out == "" and "Traceback" not in err and "catastrophic" in err


def test_the_diff_roofline_names_its_kernels():
    """Issue 26 item 6: the diff's roofline had points and arrows but no kernel named."""
    import re

    from ncu_advisor import analyze, read_report
    from ncu_advisor.diff.compare import diff_runs
    from ncu_advisor.render.diff_html import roofline_diff_svg

    data = diff_runs(analyze(read_report(OFF_RAW)), analyze(read_report(ON_RAW))).to_dict()
    svg = roofline_diff_svg(data)
    placed = [p for p in data["pairs"] if (p.get("roofline") or {}).get("after")]
    assert svg and placed
    # Text outside the tooltips (<title>) is the labels: some pair's short name is drawn.
    drawn = re.sub(r"<title>.*?</title>", "", svg, flags=re.S)
    names = {(p.get("after") or p.get("before") or {}).get("short_name") for p in placed}
    assert any(n and n[:12] in drawn for n in names)
