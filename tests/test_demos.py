"""Tests of the teaching-lab demo pairs in kernels/ and of ncu_advisor.demos.

The metadata tests run anywhere. Compilation tests need nvcc (skipped without it). The
correctness tests carry the ``gpu`` marker and need CuPy and an NVIDIA GPU.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ncu_advisor import demos
from ncu_advisor.demos import __main__ as demos_program
from ncu_advisor.demos import catalogue
from ncu_advisor.errors import DemoError, NcuAdviseError

REPO = Path(__file__).resolve().parent.parent
EXPECTED_IDS = {
    "roofline",
    "coalescing",
    "coarsening",
    "occupancy",
    "launch-config",
    "divergence",
    "fusion",
    "precision",
    "privatization",
    "tiling",
    "math-rewrite",
    "local-memory",
    "bank-conflicts",
    "fast-math",
}
# ncu metric names: unit prefix, double underscore, then dotted lower-case parts.
METRIC_RE = re.compile(r"^[a-z][a-z0-9]*__[a-z0-9_]+(\.[a-z0-9_]+)*$")
LAUNCHER_NAMES = {"setup", "run_bad", "run_good", "reference", "work", "TOLERANCE"}
# Signature metrics seen in a raw export of `ncu --set full` (Nsight Compute 2025.3.1) on an H200
# on 2026-11-29. Several plausible names are NOT collected by that set (e.g. lts__t_bytes.sum,
# l1tex__t_bytes.sum, smsp__inst_executed_op_global_ld.sum and the plain .sum of the
# smsp__sass_thread_inst_executed_op_*fma_pred_on counters), so a new signature metric must be
# checked against a real capture before it is added here.
VERIFIED_FULL_SET_METRICS = {
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "launch__grid_size",
    "launch__occupancy_limit_shared_mem",
    "launch__registers_per_thread",
    "launch__waves_per_multiprocessor",
    "lts__t_sectors.sum",
    "sass__inst_executed_local_loads",
    "sass__inst_executed_local_stores",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "smsp__inst_executed_op_global_red.sum",
    "smsp__inst_executed_op_shared_atom.sum",
    "smsp__sass_average_branch_targets_threads_uniform.pct",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
    "smsp__sass_branch_targets_threads_divergent.sum",
    "smsp__sass_inst_executed_op_global_ld.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
}

ALL_DEMOS = demos.list_demos()
DEMO_IDS = [d.name for d in ALL_DEMOS]


def _checklist_ids() -> set[str] | None:
    """Read the ids from the table of shared/CHECKLIST.md when a copy is reachable."""
    for base in (REPO, *REPO.parents):
        path = base / "shared" / "CHECKLIST.md"
        if path.is_file():
            return set(re.findall(r"^\| `([a-z-]+)` \|", path.read_text(), flags=re.M))
    return None


def test_one_demo_per_checklist_id() -> None:
    assert set(DEMO_IDS) == EXPECTED_IDS
    assert len(DEMO_IDS) == len(set(DEMO_IDS))
    assert set(demos.CHECKLIST_IDS) == EXPECTED_IDS
    assert DEMO_IDS == list(demos.CHECKLIST_IDS)  # listed in checklist order


def test_checklist_file_agrees_when_present() -> None:
    ids = _checklist_ids()
    if ids is None:
        pytest.skip("shared/CHECKLIST.md not reachable from the checkout")
    assert ids == EXPECTED_IDS


def test_kernel_names_unique_across_demos() -> None:
    names = [k for d in ALL_DEMOS for k in d.kernel_names]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("demo", ALL_DEMOS, ids=DEMO_IDS)
def test_metadata_complete(demo: demos.Demo) -> None:
    assert demo.path.name == demo.name
    assert demo.category == demo.name
    for text in (demo.title, demo.problem, demo.tolerance):
        assert text.strip()
    for part in ("what", "why", "fix", "expect"):
        text = getattr(demo.lesson, part)
        assert len(text) > 80, f"lesson.{part} is too short"
    for variant in demo.variants:
        assert variant.kernels and variant.description
        # Kernel names say which demo they belong to.
        prefix = demo.name.replace("-", "_")
        assert all(k.startswith(prefix + "_") for k in variant.kernels), variant.kernels
    assert demo.signatures, "every demo lists at least one ncu signature"


@pytest.mark.parametrize("demo", ALL_DEMOS, ids=DEMO_IDS)
def test_sources_present_and_name_the_kernels(demo: demos.Demo) -> None:
    source = demo.source()
    assert source.strip()
    assert "#include <cstdio>" not in source and "<iostream>" not in source  # NVRTC has no libc++
    for kernel in demo.kernel_names:
        # extern "C" keeps the names unmangled, so ncu prints exactly these names.
        pattern = rf'extern "C" __global__ void(?: __launch_bounds__\([^)]*\))?\s+{kernel}\('
        assert re.search(pattern, source), f'{kernel} is not an extern "C" kernel in kernels.cu'


@pytest.mark.parametrize("demo", ALL_DEMOS, ids=DEMO_IDS)
def test_signatures_well_formed(demo: demos.Demo) -> None:
    for sig in demo.signatures:
        assert METRIC_RE.match(sig.metric), sig.metric
        assert sig.metric in VERIFIED_FULL_SET_METRICS, f"{sig.metric} not verified in --set full"
        assert sig.scope in ("each", "sum")
        assert sig.note
        for cond in (sig.bad, sig.good):
            op, value = demos.parse_condition(cond)
            assert op in demos.CONDITION_OPERATORS
            assert value == value  # not NaN


@pytest.mark.parametrize("demo", ALL_DEMOS, ids=DEMO_IDS)
def test_launcher_defines_the_interface(demo: demos.Demo) -> None:
    # Parse instead of import: launch.py imports CuPy at the top.
    tree = ast.parse(demo.launch_path.read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    defined |= {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    needed = LAUNCHER_NAMES | {v.run for v in demo.variants}
    assert needed <= defined, needed - defined
    assert ast.get_docstring(tree)


def test_parse_condition_rejects_garbage() -> None:
    assert demos.parse_condition(">= 28") == (">=", 28.0)
    assert demos.parse_condition("< 1e8") == ("<", 1e8)
    assert demos.parse_condition("== 0") == ("==", 0.0)
    for bad in ("about 3", "<", "> x", "28"):
        with pytest.raises(DemoError):
            demos.parse_condition(bad)


def test_unknown_demo_is_a_one_line_error() -> None:
    with pytest.raises(DemoError, match="unknown demo 'nope'") as info:
        demos.get_demo("nope")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, NcuAdviseError)


def test_malformed_demo_toml_names_file_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "demo.toml").write_text('name = "broken"\ncategory = "broken"\n')
    monkeypatch.setattr(catalogue, "kernels_dir", lambda: tmp_path)
    with pytest.raises(DemoError, match=r"broken/demo.toml: missing"):
        demos.list_demos()


def test_cli_list_needs_no_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert demos_program.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in EXPECTED_IDS:
        assert name in out
    assert "coalescing_strided_copy" in out


def test_cli_unknown_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert demos_program.main(["time", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown demo 'nope'")


def test_missing_cupy_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("no cupy")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(DemoError, match=r"CuPy is not installed: pip install 'ncu-advise\[gpu\]'"):
        demos.check_demo("coalescing")


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("demo", ALL_DEMOS, ids=DEMO_IDS)
def test_kernels_compile_for_sm90(demo: demos.Demo, tmp_path: Path) -> None:
    out = tmp_path / "k.cubin"
    cmd = [NVCC, "-arch=sm_90", "-lineinfo", "-O3", "-std=c++17", "-cubin", "-Xptxas", "-v"]
    proc = subprocess.run(
        [*cmd, "-o", str(out), str(demo.source_path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    for kernel in demo.kernel_names:
        assert f"Compiling entry function '{kernel}'" in proc.stderr
    if demo.name == "local-memory":
        # The pathology must survive compilation: a 256-byte local array in the bad kernel only.
        props = _ptxas_properties(proc.stderr)
        assert props["local_memory_array_lookup"] >= 256
        assert props["local_memory_shuffle_lookup"] == 0


def _ptxas_properties(log: str) -> dict[str, int]:
    """Map each entry function to its stack frame size from a ``ptxas -v`` log."""
    frames: dict[str, int] = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame", line)
        if m and current:
            frames[current] = int(m.group(1))
            current = None
    return frames


# ---- GPU: correctness of every pair on the small problem size.


def _require_gpu() -> None:
    pytest.importorskip("cupy")
    try:
        demos.require_gpu()
    except DemoError as exc:  # CuPy installed but no usable GPU here
        pytest.skip(str(exc))


@pytest.mark.gpu
@pytest.mark.parametrize("name", DEMO_IDS)
def test_demo_pair_matches_reference(name: str) -> None:
    _require_gpu()
    errors = demos.check_demo(name, size="small")
    assert {"bad", "good"} <= set(errors)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["coalescing", "fusion"])
def test_demo_timing_on_default_size(name: str) -> None:
    _require_gpu()
    result = demos.time_demo(name, repeats=5, warmup=2)
    assert result["speedup"] > 1.0
    assert result["good"]["median_ms"] > 0
