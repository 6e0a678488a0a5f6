"""Source lines behind findings: the demos' findings name the lines that cause them."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from ncu_advisor.analysis import analyze
from ncu_advisor.cli import main
from ncu_advisor.errors import ReportParseError
from ncu_advisor.readers import read_report
from ncu_advisor.readers.source_page import read_source_page
from ncu_advisor.render.html import render_html
from ncu_advisor.render.text import render_text

ROOT = Path(__file__).resolve().parent.parent
LINEINFO = ROOT / "sample_reports" / "demos_lineinfo"
KERNELS = ROOT / "kernels"
SOURCE_PAGE = {"coalescing": "source.csv", "bank-conflicts": "source.csv",
               "local-memory": "source.csv.gz", "divergence": "source.csv"}
# The line each demo's finding must name, and the code that is on it in kernels/NAME/kernels.cu.
EXPECTED = {
    ("coalescing", "coalescing.global-loads"): (25, "v[k] = in[e[k]];", "LDG"),
    ("coalescing", "coalescing.global-stores"): (29, "out[e[k]] = v[k];", "STG"),
    # The column-wise read of the unpadded tile (the row-wise write on line 18 is 1-way).
    ("bank-conflicts", "bank-conflicts.shared-memory"):
        (25, "tile[threadIdx.x][threadIdx.y + j]", "LDS"),
    ("local-memory", "local-memory.local-traffic"): (24, "table[c & 63u]", "LDL"),
    ("divergence", "divergence.warp-divergence"): (30, "if (kind[e])", "BRA"),
}


def _source_line(demo: str, line: int) -> str:
    return (KERNELS / demo / "kernels.cu").read_text().splitlines()[line - 1]


def _analysis(demo: str, with_page: bool = True):
    paths = [LINEINFO / f"{demo}.details.csv", LINEINFO / f"{demo}.raw.csv.gz"]
    if with_page:
        paths.append(LINEINFO / f"{demo}.{SOURCE_PAGE[demo]}")
    return analyze(read_report(paths))


@pytest.fixture(scope="module")
def page_analyses():
    return {demo: _analysis(demo) for demo in SOURCE_PAGE}


def _finding(analysis, rule):
    launches = analysis.report.launches
    found = [f for f in analysis.findings if f.rule == rule]
    assert found, f"{rule} did not fire"
    bad = [f for f in found if launches.loc[f.launch, "short_name"].endswith(
        ("strided_copy", "unpadded", "array_lookup", "interleaved_paths"))]
    return bad[0]


@pytest.mark.parametrize(("demo", "rule"), list(EXPECTED))
def test_source_page_names_the_line_that_causes_the_finding(page_analyses, demo, rule):
    line, code, opcode = EXPECTED[(demo, rule)]
    assert code in _source_line(demo, line)
    finding = _finding(page_analyses[demo], rule)
    top = finding.source_lines[0]
    assert top["line"] == line
    assert top["file"].endswith(".cu")
    assert top["sass"].startswith(opcode) or f" {opcode}" in top["sass"]
    assert top["share_pct"] >= 50.0
    shares = [s["share_pct"] for s in finding.source_lines]
    assert shares == sorted(shares, reverse=True) and sum(shares) <= 100.2  # rounded to 0.1 each
    assert finding.collect_with is None


def test_coalescing_loads_and_stores_are_told_apart(page_analyses):
    analysis = page_analyses["coalescing"]
    loads = _finding(analysis, "coalescing.global-loads").source_lines
    stores = _finding(analysis, "coalescing.global-stores").source_lines
    # Lines 25 and 29 carry the same excessive sectors; each finding names only its own.
    assert [s["line"] for s in loads] == [25] and [s["line"] for s in stores] == [29]


@pytest.mark.slow
@pytest.mark.parametrize("demo", ["coalescing", "bank-conflicts", "local-memory"])
def test_ncu_rep_names_the_same_lines(page_analyses, demo):
    analysis = analyze(read_report(LINEINFO / f"{demo}.ncu-rep.gz"))
    assert not analysis.report.source_lines.empty
    for (name, rule), (line, _, _) in EXPECTED.items():
        if name != demo:
            continue
        from_rep = _finding(analysis, rule).source_lines
        from_page = _finding(page_analyses[demo], rule).source_lines
        assert from_rep[0]["line"] == line
        assert [s["line"] for s in from_rep] == [s["line"] for s in from_page]


def test_page_tables_attach_to_the_launch_of_their_function(page_analyses):
    for demo, analysis in page_analyses.items():
        lines = analysis.report.source_lines
        names = analysis.report.launches.set_index("launch")["name"]
        assert lines["launch"].nunique() == 2, demo  # one table per kernel of the pair
        for launch, rows in lines.groupby("launch"):
            assert set(rows["function"]) == {names[launch]}


def test_source_page_table_matches_the_export():
    page = read_source_page(LINEINFO / "coalescing.source.csv")
    strided = page[page["function"] == "coalescing_strided_copy"]
    per_line = strided.groupby("line")["l2_sectors_global_excessive"].sum()
    # The CUDA line rows of the export hold these sums: 58,720,256 on lines 25 and 29.
    assert per_line[25] == per_line[29] == 58720256
    assert strided["address"].is_unique and len(strided) == 64


def test_without_source_counters_the_finding_says_how_to_collect_them():
    analysis = _analysis("coalescing", with_page=False)
    finding = _finding(analysis, "coalescing.global-loads")
    assert list(finding.source_lines) == []
    assert "-lineinfo" in finding.collect_with and "--page source" in finding.collect_with
    ranked = [g for g in analysis.to_dict()["findings"] if g["rule"] == finding.rule]
    assert ranked[0]["collect_with"] == finding.collect_with


def test_source_page_alone_is_a_one_line_error(capsys):
    with pytest.raises(ReportParseError, match="read it together with the details or raw"):
        read_report(LINEINFO / "coalescing.source.csv")
    code = main(["analyze", str(LINEINFO / "coalescing.source.csv")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_a_page_of_another_capture_is_left_out_with_a_warning(tmp_path):
    page = (LINEINFO / "coalescing.source.csv").read_text().replace(
        "coalescing_contiguous_copy", "some_other_kernel")
    other = tmp_path / "generated_other.source.csv"
    other.write_text(page)
    details = tmp_path / "coalescing.details.csv"
    details.write_bytes((LINEINFO / "coalescing.details.csv").read_bytes())
    raw = tmp_path / "coalescing.raw.csv"
    raw.write_bytes(gzip.decompress((LINEINFO / "coalescing.raw.csv.gz").read_bytes()))
    report = read_report([details, raw, other])
    assert set(report.source_lines["function"]) == {"coalescing_strided_copy"}
    assert any("some_other_kernel" in w for w in report.warnings)


def test_json_text_and_html_name_the_lines(page_analyses):
    data = page_analyses["bank-conflicts"].to_dict()
    ranked = next(g for g in data["findings"] if g["rule"] == "bank-conflicts.shared-memory")
    assert ranked["source_lines"][0]["line"] == 25
    assert set(ranked["source_lines"][0]) >= {"file", "line", "share_pct", "sass"}
    text = render_text(data, width=120)
    assert ".cubin.cu:25 (100%): LDS" in text
    html = render_html(data)
    assert ".cubin.cu:25</code>" in html and "LDS R11, [R14]" in html


# ~15 s: the .ncu-rep read in several reader children.
@pytest.mark.slow
def test_ncu_rep_lines_read_by_several_children_are_the_same(monkeypatch):
    """The native reader frees nothing until its process ends, so source lines are read by a
    child per few launches; how the launches are split must not change the table."""
    from ncu_advisor.readers import ncu_rep_child

    path = ROOT / "sample_reports/forms/forms_app.ncu-rep.gz"
    whole = read_report(path).source_lines
    monkeypatch.setattr(ncu_rep_child, "LINES_PER_CHILD", 1)
    split = read_report(path).source_lines
    assert len(whole) > 0 and whole["launch"].nunique() > 1
    pd.testing.assert_frame_equal(split, whole)
