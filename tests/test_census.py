"""Census, then depth (profiling/census.py): real captures of a 10-step PyTorch training loop.

``sample_reports/census/`` holds, from the H200 (PROVENANCE.md there): the census raw page of
the loop (every launch, its duration alone), the two depth runs the default profiling made
from it, and the same loop profiled launch by launch with the advisor set (``all``).
"""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import pytest
from conftest import ncu_calls, use_fake_ncu

from ncu_advisor import analyze, read_report
from ncu_advisor.errors import ProfilingInterrupted
from ncu_advisor.profiling import census
from ncu_advisor.profiling.run import read_profiled, run_profile

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "sample_reports" / "census"
LOOP = "torch_train_loop"


def _unzipped(name: str, tmp: Path) -> Path:
    out = tmp / name.removesuffix(".gz")
    with gzip.open(CAPTURES / name) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("census")
    return census.plan_depth(census.read_census(_unzipped(f"{LOOP}.default.census.raw.csv.gz",
                                                          tmp)))


@pytest.fixture(scope="module")
def weighted(plan):
    deep = read_report([CAPTURES / f"{LOOP}.default.{page}.csv.gz"
                        for page in ("raw", "details", "depth2.raw", "depth2.details")])
    return analyze(census.weigh(deep, plan))


@pytest.fixture(scope="module")
def every_launch():
    return analyze(read_report([CAPTURES / f"{LOOP}.all.raw.csv.gz",
                                CAPTURES / f"{LOOP}.all.details.csv.gz"]))


@pytest.mark.parametrize(("name", "function"), [
    ("void at::<unnamed>::multi_tensor_apply_kernel<at::<unnamed>::TensorListMetadata<1>, "
     "std::multiplies<float>, float>(T1, T2, T3...)", "multi_tensor_apply_kernel"),
    ("void kT<2>(float *, int)", "kT"),
    ("kA", "kA"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma",
     "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(T1::Params)",
     "Kernel2"),
])
def test_function_name_is_what_ncu_k_matches(name, function):
    assert census.function_name(name) == function


def test_one_kernel_printed_two_ways_by_ncu_is_one_shape():
    # The census and the depth run of the same loop printed these for one kernel.
    census_name = ("void at::<unnamed>::multi_tensor_apply_kernel<at::<unnamed>::"
                   "TensorListMetadata<1>, at::<unnamed>::BinaryOpScalarFunctor<float, 1, 1, 0>, "
                   "std::multiplies<float>, float>(T1, T2, T3...)")
    depth_name = ("void unnamed>::multi_tensor_apply_kernel<unnamed>::TensorListMetadata<1>, "
                  "unnamed>::BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>, "
                  "float>(T1, T2, T3...)")
    assert census.canonical_name(census_name) == census.canonical_name(depth_name)
    assert census.canonical_name("void kT<1>(float *, int)") != census.canonical_name(
        "void kT<2>(float *, int)")


def test_census_reads_every_launch_into_shapes(plan):
    c = plan.census
    assert c.launches == 358 and len(c.shapes) == 38
    assert sum(s.launches for s in c.shapes) == 358
    assert c.total_ns == pytest.approx(sum(s.time_ns for s in c.shapes))
    times = [s.time_ns for s in c.shapes]
    assert times == sorted(times, reverse=True)


def test_plan_covers_the_time_with_one_launch_per_shape(plan):
    assert plan.coverage >= census.DEFAULT_COVERAGE
    assert len(plan.selected) < len(plan.census.shapes)
    run = plan.filters  # one depth run of the program
    assert run[:6] == ["--kernel-name-base", "mangled", "--filter-mode", "per-launch-config",
                       "-c", "1"]
    assert run[6] == "-k" and run[7].startswith("regex:^(")
    assert "358 launches, 38 kernel shapes; deep-profiling 31" in plan.summary()


def test_the_depth_filter_reaches_every_instantiation_by_its_mangled_name(plan):
    # AdamW's multi-tensor kernels: seven instantiations with one grid and block hold ~28% of
    # the loop. ncu's per-launch-config key is the function name unless the name base is
    # mangled (probed on the H200), and -k then sees mangled names: C++ kernels by their
    # length-prefixed name, C-linkage ones by their bare name.
    pattern = re.compile(plan.filters[7].removeprefix("regex:"))
    assert pattern.search("_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18Tensor"
                          "ListMetadataILi4EEENS1_14FunctorI")
    assert pattern.search("_Z2kTILi1EEvPfi") is None
    assert census._name_filter(["kT", "kA"]) == ["-k", "regex:^(kA|kT)$|(2kA|2kT)"]
    c_linkage = re.compile(census._name_filter(["kA"])[1].removeprefix("regex:"))
    assert c_linkage.search("kA") and c_linkage.search("_Z2kAPfi")
    assert c_linkage.search("kAB") is None
    assert census._name_filter(["operator()"]) == []  # not an identifier: no name filter


def test_weighted_depth_counts_every_launch(weighted, plan):
    launches = weighted.report.launches
    assert len(launches) == 34  # one per shape reached, repeats of a shape dropped
    assert weighted.report.session["census"]["profiled_shapes"] == 34
    # Every census launch is counted once: by a deep launch's invocations, or as a shape
    # that was not deep-profiled (whose time stays in the total).
    profiled = {(census.canonical_name(r.name), f"({r.grid_x}, {r.grid_y}, {r.grid_z})",
                 f"({r.block_x}, {r.block_y}, {r.block_z})") for r in launches.itertuples()}
    missing = [s for s in plan.census.shapes if s.match_key[:3] not in profiled]
    assert int(launches["invocations"].sum()) + sum(s.launches for s in missing) == 358
    assert weighted.report.session["unprofiled_time_ns"] == pytest.approx(
        sum(s.time_ns for s in missing))
    assert weighted.total_time_ns == pytest.approx(plan.census.total_ns)


def test_weighted_depth_gives_the_all_launch_advice(weighted, every_launch):
    """Same top actions, time shares within 2 points, from 36 launches instead of 358."""
    mine, theirs = _shares(weighted), _shares(every_launch)
    assert (mine.reindex(theirs.index).fillna(0) - theirs).abs().max() < 2.0
    # AdamW's foreach kernels hold about a third of the loop: fused=True comes first.
    assert weighted.actions[0].id == every_launch.actions[0].id == "fused-optimizer"
    assert {a.id for a in weighted.actions[:3]} == {a.id for a in every_launch.actions[:3]}
    for a in weighted.actions[:3]:
        b = next(x for x in every_launch.actions if x.id == a.id)
        assert a.estimated_saving_ns == pytest.approx(b.estimated_saving_ns, rel=0.3)


def _shares(a):
    """Each kernel shape's share of the run's GPU time, in percent."""
    launches = a.report.launches
    time = launches["duration_ns"] * launches["invocations"]
    key = (launches["name"].map(census.canonical_name) + launches["grid_x"].astype(str)
           + launches["block_x"].astype(str))
    return time.groupby(key).sum() / a.total_time_ns * 100


def _one_run_default(stem: str, tmp: Path):
    """A default run of the wrapper with one depth run (2026-12-03): plan and weighted analysis."""
    plan = census.plan_depth(census.read_census(_unzipped(f"{stem}.census.raw.csv.gz", tmp)))
    deep = read_report([CAPTURES / f"{stem}.{page}.csv.gz" for page in ("raw", "details")])
    return plan, census.weigh(deep, plan)


def test_one_depth_run_reaches_every_planned_shape_on_the_h200(tmp_path):
    """The mangled-name filter, on ncu itself: every instantiation in one run of the program."""
    for stem in ("torch_train_loop.onerun", "torch_transformer_loop.default"):
        plan, weighted = _one_run_default(stem, tmp_path)
        assert plan.filters[:2] == ["--kernel-name-base", "mangled"]
        facts = weighted.session["census"]
        assert facts["profiled_shapes"] >= facts["deep_shapes"], stem
        assert not [w for w in weighted.warnings if "not reached" in w or "match no" in w]
        adamw = [s for s in plan.selected if s.function == "multi_tensor_apply_kernel"]
        assert len(adamw) >= 5  # AdamW's instantiations, one configuration: all of them


@pytest.mark.slow
def test_a_transformer_loop_gets_the_all_launch_advice_from_one_launch_per_shape(tmp_path):
    """947 launches of 71 shapes; 61 deep launches give the same top three and time shares.

    The all-launch profile was taken in two parts (-c 474, then --launch-skip 474): every
    launch under the advisor set did not fit one 10-minute call of the GPU machine.
    """
    _, weighted = _one_run_default("torch_transformer_loop.default", tmp_path)
    mine = analyze(weighted)
    theirs = analyze(read_report([CAPTURES / f"torch_transformer_loop.all{part}.{page}.csv.gz"
                                  for part in "AB" for page in ("raw", "details")]))
    assert len(theirs.report.launches) == 947
    a, b = _shares(mine), _shares(theirs)
    assert (a.reindex(b.index).fillna(0) - b).abs().max() < 2.0
    assert [x.id for x in mine.actions[:3]] == [x.id for x in theirs.actions[:3]]
    for x in mine.actions[:2]:
        y = next(z for z in theirs.actions if z.id == x.id)
        assert x.estimated_saving_ns == pytest.approx(y.estimated_saving_ns, rel=0.3)


# --------------------------------------------------------------------------- through the wrapper


@pytest.fixture
def fake(monkeypatch, tmp_path):
    return use_fake_ncu(monkeypatch, tmp_path)


PY = "python3"


def test_default_profiling_is_a_census_then_depth(fake, tmp_path):
    lines = []
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path / "out", progress=False,
                         on_plan=lines.append)
    calls = [c for c in ncu_calls(tmp_path) if "--version" not in c and "--import" not in c]
    assert len(calls) == 2
    assert "--metrics" in calls[0] and census.CENSUS_METRICS in calls[0]
    assert "--section" not in calls[0]
    assert calls[1][calls[1].index("--filter-mode") + 1] == "per-launch-config"
    assert "--section" in calls[1]
    assert lines and lines[0].startswith("census: 9 launches")
    assert result.plan is not None and "census" in result.timings
    report = read_profiled(result)
    # forms_app: 9 launches of 9 shapes (saxpy and scale_vec run with different grids).
    assert len(report.launches) == 9
    assert int(report.launches["invocations"].sum()) == 9
    assert report.session["census"]["launches"] == 9


@pytest.mark.parametrize("choice", [{"kernel_name": "saxpy"}, {"launch_count": 3},
                                    {"extra": ("--launch-skip", "2")},
                                    {"extra": ("--nvtx-include", "a/")},
                                    {"all_launches": True}])
def test_a_user_choice_of_launches_skips_the_census(fake, tmp_path, choice):
    result = run_profile(PY, ["-c", "pass"], out_dir=tmp_path / "out", progress=False, **choice)
    calls = [c for c in ncu_calls(tmp_path) if "--version" not in c and "--import" not in c]
    assert len(calls) == 1 and "--filter-mode" not in calls[0]
    assert result.plan is None


def test_coverage_out_of_range_is_refused(fake, tmp_path):
    from ncu_advisor.errors import ProfilingError

    with pytest.raises(ProfilingError, match="coverage"):
        run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False, coverage=0)


def test_ctrl_c_during_the_census_exits_130(fake, tmp_path, monkeypatch, ctrl_c):
    monkeypatch.setenv("FAKE_NCU_DELAY", "0.1")
    monkeypatch.setenv("FAKE_NCU_SIGINT_PARENT", "2")  # Ctrl-C after the census's 2nd launch
    with pytest.raises(ProfilingInterrupted) as exc:
        run_profile(PY, ["-c", "pass"], out_dir=tmp_path, progress=False)
    assert exc.value.exit_code == 130 and "census" in str(exc.value)
