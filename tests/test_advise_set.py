"""The advisor set reaches the same findings as ``--set full``.

Two checks:

* on every committed full-set capture of the demo pairs, keeping only the metrics of the
  advisor set (and ncu's rule results of its sections) changes no finding, no quantity and no
  roofline bound: the set holds everything the analysis reads (deterministic, no GPU);
* on the captures made on the H200 with both sets, one after the other, by
  ``scripts/gpu_profile_bench.sh`` (``sample_reports/advise_set/NAME.{full,advise}.*``), the
  findings are the same (skipped until those captures are committed).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ncu_advisor.analysis import analyze
from ncu_advisor.derive.quantities import NCU_STATED, metrics_of, quantity_names
from ncu_advisor.profiling import sections as collect
from ncu_advisor.readers import read_report
from ncu_advisor.report import Report

ROOT = Path(__file__).resolve().parent.parent
DEMOS = ROOT / "sample_reports" / "demos"
ADVISE = ROOT / "sample_reports" / "advise_set"
FOREIGN = ROOT / "sample_reports" / "foreign"
DEMO_NAMES = sorted(p.name.split(".")[0] for p in DEMOS.glob("*.raw.csv"))
# Code this project did not write: PyTorch ops, Triton, CuPy built-ins, a TF32 matmul.
FOREIGN_NAMES = ["torch_ops", "triton_kernels", "cupy_builtins", "torch_tf32_on"]
# Each pair takes about 4 s to analyze twice; these run by default, the rest under -m slow.
FAST = {"coalescing", "bank-conflicts", "occupancy", "triton_kernels"}


def _files(name: str) -> list[Path]:
    folder = FOREIGN if name in FOREIGN_NAMES else DEMOS
    return [next(folder.glob(f"{name}.{page}.csv*")) for page in ("raw", "details")]


def reduced(report: Report, leave_out: Iterable[str] = ()) -> Report:
    """The report as the advisor set (less ``leave_out``) would have collected it."""
    keep = set(collect.advisor_metrics()) - set(leave_out)
    metrics = report.metrics[report.metrics["metric"].isin(keep)].reset_index(drop=True)
    rules = report.ncu_rules[report.ncu_rules["section"].isin(collect.RULE_SECTIONS)]
    return Report(launches=report.launches.copy(), metrics=metrics,
                  ncu_rules=rules.reset_index(drop=True), session=dict(report.session),
                  sources=list(report.sources), warnings=list(report.warnings))


def findings_of(result) -> set[tuple]:
    # Not evidence_source: "both" marks a finding that an ncu rule of the same category also
    # raised, which needs that rule's section; the advisor set keeps only a few of them.
    return {(f.launch, f.rule, f.severity, f.confidence) for f in result.findings}


@pytest.fixture(scope="module", params=[
    pytest.param(n, marks=() if n in FAST else pytest.mark.slow)
    for n in DEMO_NAMES + FOREIGN_NAMES])
def full_and_reduced(request):
    name = request.param
    report = read_report(_files(name))
    return name, analyze(report), analyze(reduced(report))


def test_reduced_capture_keeps_every_finding(full_and_reduced):
    name, full, small = full_and_reduced
    assert findings_of(full), name  # every capture draws findings: the check can fail
    assert findings_of(small) == findings_of(full), name
    assert {(f.launch, f.rule): f.estimated_saving_ns for f in small.findings} == pytest.approx(
        {(f.launch, f.rule): f.estimated_saving_ns for f in full.findings}, nan_ok=True)
    assert [n.rule for n in small.not_evaluated] == [n.rule for n in full.not_evaluated]


def test_reduced_capture_keeps_every_quantity_and_bound(full_and_reduced):
    name, full, small = full_and_reduced
    # Quantities stated only by ncu's rule messages of sections outside the set (the memory
    # tables' access-pattern speedups): fallbacks for a details-page export, unused when the
    # metrics are there (the findings test above shows it).
    stated = [q.name for q in NCU_STATED]
    # Evidence-only quantities the set leaves out to save a pass (collect.LEFT_OUT_FOR_PASSES),
    # and the derived ones made from them: unknown in the reduced report, and only they.
    left_out = {q for q in quantity_names()
                if set(metrics_of(q)) & set(collect.LEFT_OUT_FOR_PASSES)}
    assert left_out, "the set leaves nothing out: drop this exclusion"
    assert small.quantities[sorted(left_out & set(small.quantities.columns))].isna().all().all()
    drop = stated + sorted(left_out & set(full.quantities.columns))
    pd.testing.assert_frame_equal(small.quantities.drop(columns=drop),
                                  full.quantities.drop(columns=drop), check_exact=False)
    assert {k: r.bound for k, r in small.rooflines.items()} == {
        k: r.bound for k, r in full.rooflines.items()}
    assert {k: r.peak_source for k, r in small.rooflines.items()} == {
        k: r.peak_source for k, r in full.rooflines.items()}


def test_reduced_capture_is_a_small_part_of_full():
    report = read_report([DEMOS / "coalescing.raw.csv"])
    full = report.metrics["metric"].nunique()
    kept = reduced(report).metrics["metric"].nunique()
    assert kept < full / 10, (kept, full)


# --------------------------------------------------------------------------- H200 captures


def _captured_pairs() -> list[str]:
    if not ADVISE.is_dir():
        return []
    names = set()
    for path in ADVISE.glob("*.advise.raw.csv*"):
        name = path.name.split(".advise.raw.csv")[0]
        if list(ADVISE.glob(f"{name}.full.raw.csv*")):
            names.add(name)
    return sorted(names)


def _read(name: str, which: str) -> Report:
    files = sorted(ADVISE.glob(f"{name}.{which}.raw.csv*")) + sorted(
        ADVISE.glob(f"{name}.{which}.details.csv*"))
    return read_report(files)


def _kernel_findings(result) -> set[tuple]:
    # Launch order is the same in both runs; names guard against a shifted launch.
    names = result.report.launches.set_index("launch")["short_name"]
    return {(f.launch, names.get(f.launch), f.rule) for f in result.findings}


# Metrics the section file gained after these captures were made (2026-12-01): the advise
# runs lack them until the pairs are captured again. Each one named here is a debt, not a
# pass: the ADU pipe (tiling.divergent-constant-reads, 2026-12-04; a recapture that day kept
# 20 passes, profile_bench.2026-12-04.json, but its torch_ops pair split one finding on
# threshold noise, l1_to_dram_ratio 8.00 against 7.99, so its exports were not committed) and
# the barrier stall (coarsening.barrier-bound, 2026-12-04's fifteenth session, no GPU lent).
ADDED_SINCE_CAPTURE = {"sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active",
                       "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"}
CAPTURED = _captured_pairs()


@pytest.mark.skipif(not CAPTURED, reason="no captures of both sets yet in "
                    "sample_reports/advise_set/ (made by scripts/gpu_profile_bench.sh on a GPU)")
@pytest.mark.parametrize("name", CAPTURED or ["none"])
def test_advise_capture_finds_what_full_finds(name):
    full, advise = _read(name, "full"), _read(name, "advise")
    assert list(advise.launches["short_name"]) == list(full.launches["short_name"])
    full_result, advise_result = analyze(full), analyze(advise)
    assert _kernel_findings(full_result), name
    assert _kernel_findings(advise_result) == _kernel_findings(full_result), name
    # Every metric the analysis reads that the full run had, the advise run has too.
    full_wide, advise_wide = full.wide(), advise.wide()
    wanted = set(collect.advisor_metrics()) & set(full_wide.columns)
    present = full_wide[sorted(wanted)].notna().any()
    missing = sorted(m for m in present[present].index if m not in advise_wide.columns
                     or not advise_wide[m].notna().any())
    assert sorted(set(missing) - ADDED_SINCE_CAPTURE) == [], name
    assert np.isfinite(advise_result.quantities["duration_ns"]).all()
