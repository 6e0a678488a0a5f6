"""The HTML report and the roofline chart, rendered from a real capture's analysis."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from conftest import analysis_cached
from markupsafe import escape

from ncu_advisor.render import charts
from ncu_advisor.render.formats import (
    FILTERS,
    NOT_MEASURED,
    fmt_bandwidth,
    fmt_bytes,
    fmt_duration,
    fmt_flop,
    fmt_flops,
    fmt_pct,
    fmt_qty,
    fmt_share,
)
from ncu_advisor.render.html import render_html
from ncu_advisor.render.html_view import PRINT_METRICS_MAX, build_page

ROOT = Path(__file__).resolve().parents[1]
FORMS = ROOT / "sample_reports" / "forms" / "forms_app.ncu-rep.gz"
TEMPLATES = ROOT / "ncu_advisor" / "render" / "templates"
NASTY = 'void f<a&b, "q">(int, char *)'
FIXED_TIME = "2026-11-29T19:40:00+00:00"


@pytest.fixture(scope="module")
def forms_result() -> dict:
    """The JSON contract of the real forms_app capture (9 launches, template names)."""
    # A copy: the session's cached analysis is shared with other modules.
    result = copy.deepcopy(analysis_cached(FORMS).to_dict())
    result["generated_at"] = FIXED_TIME
    return result


@pytest.fixture(scope="module")
def forms_html(forms_result: dict) -> str:
    return render_html(forms_result)


def _section(html: str, anchor: str) -> str:
    """The text of one top-level section of the page (from its id to the next section)."""
    start = html.index(f'<section id="{anchor}">')
    end = html.find("<section id=", start + 1)
    return html[start:end if end > 0 else len(html)]


def _with_nasty_kernel(result: dict) -> dict:
    """Add a kernel whose name holds every character HTML cares about, with a finding."""
    result = copy.deepcopy(result)
    nasty = copy.deepcopy(result["kernels"][1])
    nasty.update(id=99, launch=99, name=NASTY, short_name='f<a&b, "q">',
                 nvtx="range <b>&'x'")
    nasty["findings"][0]["advice"] = "Use <b>bold</b> & \"quotes\" <script>alert(1)</script>"
    result["kernels"].append(nasty)
    finding = copy.deepcopy(result["findings"][0])
    finding.update(kernel='f<a&b, "q">', kernel_ids=[99], title="Title with <i>markup</i> & co")
    result["findings"].insert(0, finding)
    return result


# --- the real capture -------------------------------------------------------------------------


def test_every_kernel_name_appears_escaped(forms_result: dict, forms_html: str) -> None:
    for kernel in forms_result["kernels"]:
        assert str(escape(kernel["name"])) in forms_html
        assert f">{escape(kernel['short_name'])}<" in forms_html


def test_template_kernel_names_never_appear_raw(forms_result: dict, forms_html: str) -> None:
    names = [k["name"] for k in forms_result["kernels"] if "<" in k["name"]]
    assert names, "the capture has template kernels (scale_vec<float, 4>, apply_pair<...>)"
    for name in names:
        assert name not in forms_html
        assert "&lt;" in str(escape(name))


def test_synthetic_kernel_name_is_escaped_everywhere(forms_result: dict) -> None:
    html = render_html(_with_nasty_kernel(forms_result))
    assert "void f&lt;a&amp;b, &#34;q&#34;&gt;(int, char *)" in html
    assert "f&lt;a&amp;b, &#34;q&#34;&gt;" in html
    assert NASTY not in html
    assert 'f<a&b, "q">' not in html
    # Text from findings and the session is escaped too.
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Title with &lt;i&gt;markup&lt;/i&gt; &amp; co" in html
    assert "range &lt;b&gt;&amp;&#39;x&#39;" in html
    # Our own scripts: the inline one, and none other.
    assert html.count("<script") == 1


def test_findings_render_in_rank_order(forms_result: dict, forms_html: str) -> None:
    table = _section(forms_html, "findings")
    titles = re.findall(r'<div class="f-title">(.*?)</div>', table)
    # Findings that ask for a change in rank order, then the info notes (folded), in order.
    ranked = forms_result["findings"]
    order = [f for f in ranked if f["severity"] != "info"] + [
        f for f in ranked if f["severity"] == "info"]
    assert titles == [str(escape(f["title"])) for f in order]
    ranks = [int(r) for r in re.findall(r'class="num r rank" data-sort="(\d+)"', table)]
    assert sorted(ranks) == list(range(1, len(ranked) + 1))


def test_the_first_screen_is_what_to_change(forms_result: dict, forms_html: str) -> None:
    """Issue 26: the actions and the top findings come before the notes, charts and tables;
    info notes are folded."""
    at = {name: forms_html.index(f'id="{name}"') for name in
          ("actions", "top-findings", "validity", "summary", "roofline", "findings", "kernels")}
    assert at["actions"] < at["top-findings"] < at["validity"] < at["summary"] < at["roofline"]
    top = _section(forms_html, "top-findings")
    assert top.count('<div class="f-title">') == 5 and "sev-info" not in top
    notes = forms_html[forms_html.index('<details class="info-notes"'):]
    notes = notes[:notes.index("</details>")]
    infos = [f for f in forms_result["findings"] if f["severity"] == "info"]
    assert notes.count('<div class="f-title">') == len(infos) > 0


def test_findings_link_to_their_kernels(forms_result: dict, forms_html: str) -> None:
    table = _section(forms_html, "findings")
    ids = {f'id="k-{i}"' for i in range(len(forms_result["kernels"]))}
    assert all(anchor in forms_html for anchor in ids)
    for finding in forms_result["findings"]:
        for kernel_id in finding.get("kernel_ids") or []:
            index = next(i for i, k in enumerate(forms_result["kernels"]) if k["id"] == kernel_id)
            assert f'href="#k-{index}"' in table


def test_page_loads_nothing_remote(forms_html: str) -> None:
    assert not re.search(r"<script[^>]*\ssrc=", forms_html)
    assert not re.search(r"<link[^>]*>", forms_html)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", forms_html)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", forms_html)
    assert "@import" not in forms_html
    assert "@font-face" not in forms_html
    # Links as text (ncu's rule descriptions cite the CUDA guides) are fine.
    assert "https://docs.nvidia.com" in forms_html


def test_sections_and_labels(forms_result: dict, forms_html: str) -> None:
    for anchor in ("summary", "roofline", "findings", "kernels"):
        assert f'<section id="{anchor}">' in forms_html
    assert "Nsight Compute's own rule results" in forms_html
    assert 'class="roofline"' in forms_html  # the inline chart
    assert "NVIDIA H200" in forms_html
    assert "@media print" in forms_html
    kernel = _section(forms_html, "kernels")
    assert kernel.count('<section class="kernel"') == len(forms_result["kernels"])
    # ncu's rule results are listed for the kernel that has them.
    assert "UncoalescedGlobalAccess" in kernel


def test_metrics_appendix_is_collapsible(forms_result: dict) -> None:
    result = copy.deepcopy(forms_result)
    result["kernels"][0]["metrics"] = [
        {"section": None, "metric": "dram__bytes_read.sum", "label": None, "unit": "byte",
         "value": 1.06e9, "text": "1060411904"},
        {"section": None, "metric": "device__attribute_display_name", "label": None, "unit": "",
         "value": None, "text": "NVIDIA <H200>"},
    ]
    html = render_html(result)
    assert html.count('<details class="metrics">') == 1
    assert "Raw metrics (2)" in html
    assert "dram__bytes_read.sum" in html
    assert "NVIDIA &lt;H200&gt;" in html


def test_long_metrics_appendix_stays_collapsed_in_print(forms_result: dict) -> None:
    result = copy.deepcopy(forms_result)
    rows = [{"section": None, "metric": f"m{i}", "label": None, "unit": "", "value": float(i),
             "text": str(i)} for i in range(PRINT_METRICS_MAX + 1)]
    result["kernels"][0]["metrics"] = rows
    result["kernels"][1]["metrics"] = rows[:3]
    html = render_html(result)
    assert html.count('<details class="metrics noprint">') == 1
    assert html.count('<details class="metrics">') == 1
    assert "not printed; open the HTML file" in html


def test_render_is_deterministic(forms_result: dict, forms_html: str) -> None:
    assert render_html(forms_result) == forms_html


# --- missing and null data --------------------------------------------------------------------
# The view-model reads what Analysis.to_dict writes; a small ncu set leaves values null.

METRICS_ONLY = ROOT / "sample_reports" / "forms" / "forms_app.live.metrics.csv"


@pytest.fixture(scope="module")
def metrics_result() -> dict:
    """A real ``--metrics`` capture: no GPU name, no ncu version, no roofline data."""
    result = analysis_cached(METRICS_ONLY).to_dict()
    result["generated_at"] = FIXED_TIME
    return result


def _nulled(mapping: dict) -> dict:
    """The same keys, every value null (nested mappings too): measured nothing."""
    return {k: _nulled(v) if isinstance(v, dict) else None for k, v in mapping.items()}


def test_minimal_results_render_not_measured(metrics_result: dict) -> None:
    empty = copy.deepcopy(metrics_result)
    empty.update(kernels=[], findings=[], regions=[])
    empty["summary"]["top_kernels"] = []
    named = copy.deepcopy(metrics_result)
    named["kernels"][0]["name"] = NASTY
    for result in (metrics_result, empty, named):
        html = render_html(result)
        assert "not measured" in html
        assert NASTY not in html


def test_kernel_without_sections_says_not_measured(metrics_result: dict) -> None:
    result = copy.deepcopy(metrics_result)
    kernel = result["kernels"][0]
    kernel.update(duration_ns=None, time_share=None, grid=[None, None, None], block=[None, 1, 1],
                  occupancy=_nulled(kernel["occupancy"]), launch_shape={}, quantities={},
                  findings=[], not_evaluated=[], ncu_rules=[])
    result.update(kernels=[kernel], findings=[], regions=[])
    html = render_html(result)
    kernel = html[html.index('<section class="kernel"'):]
    assert kernel.count("not measured") >= 6  # duration, share, grid, block, roofline, occupancy
    assert "no roofline data for this kernel" in kernel
    assert "no occupancy data for this kernel" in kernel
    assert "no kernel in this input has roofline data" in html


def test_null_values_inside_sections(forms_result: dict) -> None:
    result = copy.deepcopy(forms_result)
    kernel = result["kernels"][0]
    kernel["roofline"] = {**_nulled(kernel["roofline"]), "bound": "memory"}
    kernel["occupancy"].update(theoretical_pct=None, achieved_pct=None, limiter=None,
                               waves_per_sm=None)
    kernel["occupancy"]["limits"]["registers"] = None
    finding = {**kernel["findings"][0], "estimated_saving_ns": None,
               "evidence": {"x": {"value": None, "unit": "", "label": "x"}}}
    kernel["findings"] = [finding]
    result["findings"] = [{**result["findings"][0], "estimated_saving_ns": None,
                           "app_saving_pct": None, "evidence": finding["evidence"]}]
    html = render_html(result)
    assert "not measured" in html
    assert "no estimate" in html


def test_application_not_evaluated_is_listed(metrics_result: dict) -> None:
    result = copy.deepcopy(metrics_result)
    result["summary"]["application_not_evaluated"] = [
        {"rule": "fusion.memory-bound-chain", "category": "fusion", "missing": ["dram__bytes.sum"],
         "collect_with": "--section MemoryWorkloadAnalysis"}]
    html = render_html(result)
    assert "Application rules not evaluated" in html
    assert "--section MemoryWorkloadAnalysis" in html


# --- view-model and filters -------------------------------------------------------------------


def test_view_model_groups_repeated_launches(forms_result: dict) -> None:
    page = build_page(forms_result)
    assert len(page.kernels) == len(forms_result["kernels"])
    assert [f.rank for f in page.findings] == list(range(1, len(page.findings) + 1))
    for finding in page.findings:
        labels = [link.label for link in finding.kernels]
        assert len(labels) == len(set(labels))


@pytest.mark.parametrize(("func", "value", "text"), [
    (fmt_duration, 48800.0, "48.8 \u00b5s"),
    (fmt_duration, 11921440.0, "11.9 ms"),
    (fmt_duration, 640.0, "640 ns"),
    (fmt_duration, 2.5e9, "2.5 s"),
    (fmt_bytes, 1060411904.0, "1.06 GB"),
    (fmt_bytes, 512.0, "512 B"),
    (fmt_bandwidth, 3.898e12, "3.9 TB/s"),
    (fmt_flops, 6.647e13, "66.5 TFLOP/s"),
    (fmt_flops, 0.0, "0 FLOP/s"),
    (fmt_flop, 33554432.0, "33.6 MFLOP"),
    (fmt_pct, 85.1234, "85.1%"),
    (fmt_share, 0.12, "12.0%"),
])
def test_filters_format_with_units(func, value, text: str) -> None:
    assert func(value) == text


def test_filters_say_not_measured() -> None:
    for name, func in FILTERS.items():
        if name in ("sortkey", "width"):
            continue
        assert func(None) == NOT_MEASURED, name
        assert func(float("nan")) == NOT_MEASURED, name
    assert fmt_qty(4.0, "byte/sector") == "4 byte/sector"
    assert fmt_qty(3.9e12, "byte/s") == "3.9 TB/s"
    assert fmt_qty("text", None) == "text"


def test_templates_mark_no_input_safe() -> None:
    for path in TEMPLATES.iterdir():
        text = path.read_text()
        assert "|safe" not in text.replace(" ", ""), path.name
        assert "autoescape false" not in text, path.name


# --- the roofline chart -----------------------------------------------------------------------


def _roof_kernel(index: int, name: str, share: float, bound: str = "memory") -> dict:
    intensity = 0.05 * 1.7 ** (index % 15)
    return {"id": index, "name": name, "short_name": name, "time_share": share,
            "roofline": {"bound": bound, "arithmetic_intensity": intensity,
                         "achieved_flops": min(3e12 * intensity, 5e13) * (0.3 + index % 5 / 10),
                         "peak_flops": 6.7e13, "peak_bandwidth": 4.8e12, "precision": "fp32",
                         "peaks": {"fp32": 6.7e13, "fp64": 3.3e13, "fp16": 1.3e14,
                                   "tensor": None},
                         "levels": {"dram": {"peak_bandwidth": 4.8e12},
                                    "l2": {"peak_bandwidth": 1.0e13}}}}


def test_roofline_escapes_labels() -> None:
    result = {"kernels": [_roof_kernel(0, 'a<b>&"c"', 0.6), _roof_kernel(1, NASTY, 0.4)]}
    svg = charts.roofline_svg(result)
    assert svg is not None and svg.startswith("<svg")
    assert 'a<b>' not in svg and NASTY not in svg
    assert "a&lt;b&gt;&amp;" in svg
    assert "f&lt;a&amp;b" in svg
    # Tooltips name every kernel in full; points link to their sections through data-kernel.
    assert svg.count('class="rl-pt"') == 2
    assert 'data-kernel="1"' in svg
    assert "<!--" not in svg and "<?xml" not in svg and "<style" not in svg


def test_roofline_is_small_and_deterministic() -> None:
    kernels = [_roof_kernel(i, f"void kernel_{i}<float, {i}>(float *, int)", 1 / 50,
                            ("memory", "compute", "latency")[i % 3]) for i in range(50)]
    svg = charts.roofline_svg({"kernels": kernels})
    assert svg is not None
    assert len(svg.encode()) < 200_000
    assert charts.roofline_svg({"kernels": kernels}) == svg
    assert "Date" not in svg and "dc:date" not in svg
    for precision in ("FP32", "FP64", "FP16"):
        assert precision in svg
    assert "DRAM" in svg and "L2" in svg


def test_roofline_none_without_data(forms_result: dict) -> None:
    assert charts.roofline_svg({}) is None
    assert charts.roofline_svg({"kernels": [{"name": "k", "roofline": None}]}) is None
    stripped = copy.deepcopy(forms_result)
    for kernel in stripped["kernels"]:
        kernel["roofline"] = None
    assert charts.roofline_svg(stripped) is None


def test_roofline_skips_kernels_without_flops(forms_result: dict) -> None:
    svg = charts.roofline_svg(forms_result)
    assert svg is not None
    plotted = [k for k in forms_result["kernels"]
               if (k["roofline"].get("arithmetic_intensity") or 0) > 0
               and (k["roofline"].get("achieved_flops") or 0) > 0]
    assert svg.count('class="rl-pt"') == len(plotted)


def test_links_reach_the_right_kernel_across_input_files():
    """ncu IDs restart in every file: links must use the unique launch numbers."""
    import re

    from ncu_advisor.render.html import render_html

    root = Path(__file__).resolve().parent.parent
    html = render_html(analysis_cached(root / "sample_reports" / "demos").to_dict())
    sections = {}
    for anchor, body in re.findall(r'<section class="kernel" id="(k-\d+)">(.{0,600})', html,
                                   re.S):
        sections[anchor] = re.search(r"(\w+_\w+)", re.sub("<[^>]+>", " ", body)).group(1)
    links = re.findall(r'<a[^>]*href="#(k-\d+)"[^>]*>([^<]+)</a>', html)
    named = [(a, t.strip()) for a, t in links if t.strip() in sections.values()]
    assert len(named) > 30
    assert [(a, t) for a, t in named if sections[a] != t] == []


def test_roofline_labels_never_overlap_or_leave_the_plot():
    """Issue 26 item 6: crowded kernels' labels were drawn over each other and cut at the edge."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    from ncu_advisor.render.charts import RooflinePoint, label_points

    fig = Figure(figsize=(6.0, 4.0))
    FigureCanvasSVG(fig)
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e-2, 1e3)
    ax.set_ylim(1e9, 1e15)
    crowd = [RooflinePoint(i, f"vectorized_elementwise_kernel_{i}", "n", 1.0 * (1 + 0.02 * i),
                           1e12, 0.05, "memory") for i in range(12)]
    edge = [RooflinePoint(20 + i, f"a_kernel_at_the_edge_{i}", "n", 9.5e2, 1e14 * (1 + i), 0.05,
                          "compute") for i in range(3)]
    points = crowd + edge
    boxes = label_points(ax, points, points, [])
    frame = ax.bbox
    assert boxes  # some labels are placed
    for i, a in enumerate(boxes):
        assert a[0] >= frame.x0 and a[2] <= frame.x1 and a[1] >= frame.y0 and a[3] <= frame.y1
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])


def test_raw_metric_rows_are_escaped_like_template_cells():
    """The raw-metrics rows are built in Python (issue 24: the template loop was most of a
    small run's page time); each cell is escaped as the template escaped it."""
    from markupsafe import Markup

    from ncu_advisor.render.html_view import MetricRow, _metric_rows

    rows = [MetricRow(metric="a<b", section="S&T", label="'x\"", unit="byte", value=2048.0),
            MetricRow(metric="m", section=None, label=None, unit=None, value="n/a <x>")]
    labelled = str(_metric_rows(rows, labelled=True))
    assert labelled.startswith("<tr><td>a&lt;b</td><td>S&amp;T</td><td>&#39;x&#34;</td><td>")
    assert "<td>n/a &lt;x&gt;</td><td></td></tr>\n" in labelled
    assert labelled.count("<tr>") == 2 and labelled.endswith("</tr>\n")
    plain = _metric_rows(rows, labelled=False)
    assert isinstance(plain, Markup) and "S&amp;T" not in plain


def test_metric_list_is_the_record_wise_one():
    """contract._metric_list builds the raw metrics column by column (issue 24); the values and
    their Python types are those of the record-wise build it replaced."""
    from ncu_advisor import read_report
    from ncu_advisor.analysis.contract import _metric_list
    from ncu_advisor.json_text import strict

    forms = ROOT / "sample_reports" / "forms"
    for name in ("forms_app.import.raw.base.csv", "forms_app.import.details.base.csv"):
        metrics = read_report(forms / name).metrics
        part = metrics[metrics["launch"] == 1]
        cols = ["section", "metric", "label", "unit", "value", "text"]
        unique = part.drop_duplicates(subset=["metric", "label", "section"])
        expected = [strict(r) for r in unique[cols].astype(object).where(
            unique[cols].notna(), None).to_dict("records")]
        got = _metric_list(part)
        assert got == expected
        assert [[type(v) for v in r.values()] for r in got] == [
            [type(v) for v in r.values()] for r in expected]
