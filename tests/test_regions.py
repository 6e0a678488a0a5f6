"""NVTX regions on real captures: every level sums the launches inside it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ncu_advisor.analysis import analyze
from ncu_advisor.analysis.regions import OUTSIDE
from ncu_advisor.readers import read_report
from ncu_advisor.render.html import render_html
from ncu_advisor.render.text import render_text

ROOT = Path(__file__).resolve().parent.parent
FOREIGN = ROOT / "sample_reports" / "foreign"
FORMS = ROOT / "sample_reports" / "forms"


@pytest.fixture(scope="module")
def torch_ops():
    """32 PyTorch launches under nested ranges (model/block0/linear_fp32, CUB's own inside)."""
    report = read_report([FOREIGN / "torch_ops.details.csv.gz", FOREIGN / "torch_ops.raw.csv.gz"])
    return analyze(report)


@pytest.fixture(scope="module")
def forms_nvtx():
    """forms_app with ranges copies/templates and four launches outside every range."""
    return analyze(read_report(FORMS / "forms_app.live.nvtx.csv"))


def _inside(launches, name):
    if name == OUTSIDE:
        return launches[launches["nvtx"].isna()]
    nvtx = launches["nvtx"].fillna("")
    return launches[(nvtx == name) | nvtx.str.startswith(name + "/")]


def _time(rows):
    return float(np.nansum(rows["duration_ns"] * rows["invocations"]))


def test_every_region_sums_the_launches_inside_it(torch_ops):
    launches = torch_ops.report.launches
    assert len(torch_ops.regions) == 20
    for region in torch_ops.regions:
        inside = _inside(launches, region.name)
        assert region.launches == int(inside["invocations"].sum()), region.name
        assert region.duration_ns == pytest.approx(_time(inside)), region.name
        assert sorted(region.launch_ids) == sorted(inside["launch"].tolist())
        assert region.kernels == inside["short_name"].nunique()


def test_nested_levels_are_each_summed(torch_ops):
    regions = {r.name: r for r in torch_ops.regions}
    total = torch_ops.report.total_duration_ns
    # The two outermost ranges hold every launch of this capture.
    assert regions["model"].duration_ns + regions["data"].duration_ns == pytest.approx(total)
    assert regions["model"].launches == 13 and regions["data"].launches == 19
    block0 = regions["model/block0"]
    assert block0.launches == 8 and block0.depth == 1 and block0.parent == "model"
    assert regions["model/block0/act_eager"].launches == 4
    # The raw page's duration (5,385,248 ns); the details page rounds it to 5.39 ms.
    assert regions["model/block0/linear_fp32"].time_share == pytest.approx(5385248 / total)
    # An outer range = its own launches + its inner ranges.
    for region in torch_ops.regions:
        children = [r for r in torch_ops.regions if r.parent == region.name]
        assert region.duration_ns == pytest.approx(
            region.self_duration_ns + sum(c.duration_ns for c in children)), region.name
    # Outer before inner in the listing.
    names = [r.name for r in torch_ops.regions]
    assert names.index("model") < names.index("model/block0") < names.index(
        "model/block0/linear_fp32")


def test_region_bounds_and_top_findings(torch_ops):
    regions = {r.name: r for r in torch_ops.regions}
    model = regions["model"]
    assert sum(model.bounds.values()) == 13
    bound_of = {k: r.bound for k, r in torch_ops.rooflines.items()}
    assert model.bounds.get("compute", 0) == sum(
        1 for i in model.launch_ids if bound_of[i] == "compute")
    top = regions["model/block0/linear_fp32"].top_findings
    assert top and top[0]["rule"] == "precision.fp32-without-tensor-cores"
    for region in torch_ops.regions:
        savings = [f["estimated_saving_ns"] for f in region.top_findings]
        assert savings == sorted(savings, reverse=True)
        assert {f["kernel"] for f in region.top_findings} <= set(region.kernel_names)


def test_launches_outside_every_range_are_a_region(forms_nvtx):
    regions = {r.name: r for r in forms_nvtx.regions}
    assert set(regions) == {"copies", "templates", OUTSIDE}
    launches = forms_nvtx.report.launches
    outside = regions[OUTSIDE]
    assert outside.launches == 4 and outside.kernels == 2  # 3 saxpy + tiny_reduce
    assert outside.duration_ns == pytest.approx(_time(launches[launches["nvtx"].isna()]))
    assert forms_nvtx.regions[-1].name == OUTSIDE
    assert sum(r.duration_ns for r in forms_nvtx.regions) == pytest.approx(
        forms_nvtx.report.total_duration_ns)


def test_no_regions_without_nvtx():
    analysis = analyze(read_report(FORMS / "forms_app.import.raw.csv"))
    assert analysis.regions == []
    assert analysis.to_dict()["regions"] == []


def test_json_text_and_html_show_regions(torch_ops):
    data = torch_ops.to_dict()
    first = data["regions"][0]
    assert {"name", "duration_ns", "time_share", "launches", "kernels",
            "top_findings"} <= set(first)
    assert first["name"] == "model"
    text = render_text(data, width=120)
    assert text.index("NVTX range") < text.index("  ID       time")
    assert "      linear_fp32" in text  # indented under model/block0
    html = render_html(data)
    assert 'id="regions"' in html and 'title="model/block0/linear_fp32"' in html


def test_html_groups_findings_by_nvtx(torch_ops):
    html = render_html(torch_ops.to_dict(), group_by="nvtx")
    assert '<h3 class="finding-group">nvtx: <span class="mono">model/block0/linear_fp32' in html
    by_kernel = render_html(torch_ops.to_dict(), group_by="kernel")
    assert '<h3 class="finding-group">kernel:' in by_kernel
