"""Big runs: the HTML page and the text table sum launches by kernel shape and stay bounded.

The input is generated from a real capture (``benchmarks/generate.py``: the decoder training
step's raw page replicated with new IDs), so that the page crosses the big-run limit.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from ncu_advisor import analyze, read_report
from ncu_advisor.analysis.contract import select
from ncu_advisor.render import html_view
from ncu_advisor.render.html import page_document, render_html

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from generate import replicate_raw  # noqa: E402

SOURCE = ROOT / "sample_reports" / "corpus" / "torch_decoder_train.raw.csv.xz"


@pytest.fixture(scope="module")
def big_analysis(tmp_path_factory):
    raw = tmp_path_factory.mktemp("big") / "generated_1200.raw.csv"
    replicate_raw(SOURCE, raw, launches=1200)
    return analyze(read_report(raw))


@pytest.fixture(scope="module")
def big(big_analysis):
    result = big_analysis.to_dict()
    return result, render_html(result)


def test_a_big_run_lists_kernel_shapes_not_launches(big):
    result, page = big
    assert len(result["kernels"]) == 1200 > html_view.KERNEL_ROWS_LIMIT
    assert 'id="big-run"' in page
    rows = re.search(r'<table class="kernels sortable" id="kernels-table">(.*?)</table>', page,
                     re.S).group(1)
    shapes = {(k["name"], str(k["grid"]), str(k["block"])) for k in result["kernels"]}
    assert rows.count("<tr>") - 1 == min(len(shapes), html_view.KERNEL_ROWS_LIMIT)
    # One section per drawn shape, its longest launch; links land on sections that exist.
    sections = re.findall(r'<section class="kernel" id="(k-\d+)"', page)
    assert 0 < len(sections) <= html_view.DETAIL_LIMIT
    linked = set(re.findall(r'href="#(k-\d+)"', page))
    assert linked <= set(sections)


def test_the_page_document_of_a_big_run_is_whole_for_its_sections_only(big, big_analysis):
    # Every kernel's whole entry was 1.5 GB at 1 GB of text output (issue 25); the page
    # reads a few fields of the kernels it gives no section, and is the same page.
    result, page = big
    document = page_document(big_analysis)
    whole = [k for k in document["kernels"] if "ncu_rules" in k]
    assert 0 < len(whole) <= html_view.DETAIL_LIMIT < len(document["kernels"])
    assert set(document) == set(result) and document["findings"] == result["findings"]
    document["generated_at"] = result["generated_at"]
    assert render_html(document) == page
    # --kernel/--nvtx keep some launches: few enough, each has its section, whole.
    for chosen in ([k["launch"] for k in result["kernels"]][:40],
                   [k["launch"] for k in result["kernels"]][::3]):
        narrowed = select(page_document(big_analysis, launches=chosen), chosen)
        narrowed["generated_at"] = result["generated_at"]
        assert render_html(narrowed) == render_html(select(result, chosen))


def test_a_big_run_keeps_the_action_list_and_bounds_the_findings(big):
    result, page = big
    assert 'id="actions"' in page
    rows = page.count("<tr data-sevorder=")  # the top-5 table, then the list
    assert 5 < rows <= 5 + min(len(result["findings"]),
                               html_view.FINDING_ROWS_LIMIT + html_view.INFO_ROWS_LIMIT)
    assert len(page) < len(result["kernels"]) * 2_000  # ~12 KB a launch before


def test_the_findings_list_of_a_big_run_is_cut_in_rank_order():
    from ncu_advisor.render.html_view import FindingRow, _bounded_findings

    def row(rank, severity):
        return FindingRow(rank=rank, severity=severity, severity_order=0, confidence=None,
                          category=None, rule="r", title="t", kernels=[], launches=None,
                          saving_ns=None, app_saving_pct=None, speedup_pct=None, advice=None,
                          demo=None, evidence_source=None, note=None, evidence=[],
                          source_lines=[], source_cause=None, collect_with=None)

    rows = [row(i, "info" if i % 3 == 0 else "medium") for i in range(1, 2001)]
    kept = _bounded_findings(rows)
    asks = [r for r in kept if r.severity != "info"]
    assert len(asks) == html_view.FINDING_ROWS_LIMIT
    assert len(kept) - len(asks) == html_view.INFO_ROWS_LIMIT
    assert [r.rank for r in kept] == sorted(r.rank for r in kept)
    assert asks[-1].rank < 700  # the best ranked, not any


def test_a_small_run_keeps_one_row_and_section_per_launch():
    result = analyze(read_report(ROOT / "sample_reports" / "forms" /
                                 "forms_app.import.raw.base.csv")).to_dict()
    page = render_html(result)
    assert 'id="big-run"' not in page
    assert len(re.findall(r'<section class="kernel" id="k-\d+"', page)) == len(result["kernels"])


def test_the_text_table_of_a_big_run_sums_launches_by_shape(big):
    from ncu_advisor.render.text import render_text

    result, _ = big
    text = render_text(result, width=100)
    shapes = {(k["name"], str(k["grid"]), str(k["block"])) for k in result["kernels"]}
    assert f"1200 launches as {len(shapes)} kernel shapes" in text
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ID") and
                "total" in line)
    end = lines[head].index("calls") + len("calls")
    rows = []
    for line in lines[head + 1:]:
        if "launches as" in line:
            break
        rows.append(int(line[end - 5:end]))
    assert len(rows) == min(len(shapes), 20) and max(rows) > 1
    wide = render_text(result, width=100, wide=True)
    assert "launches as" not in wide  # --wide lists every launch


def test_long_work_shows_what_it_is_doing_on_a_terminal(tmp_path):
    """Issue 26 item 5: one big file showed `reading 0/?`, and nothing during the analysis."""
    import os
    import pty
    import subprocess

    raw = tmp_path / "generated_600.raw.csv"
    replicate_raw(SOURCE, raw, launches=600)
    master, slave = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "ncu_advisor.cli", "analyze", str(raw), "-f",
                           "json", "-o", str(tmp_path / "out.json")], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=slave, timeout=300, check=False,
                          env={**os.environ, "COLUMNS": "100"})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    seen = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, seen[-2000:]
    assert "reading generated_600.raw.csv (" in seen and "0/?" not in seen
    assert "analyzing 600 launch(es)" in seen
