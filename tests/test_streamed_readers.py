"""The details, summary and text readers read in pieces give the Report a whole read gave.

The readers stream (issue 25: a 1 GB details page took 4 GB, 1 GB of text 9 GB); a capture
is one piece at the default size, so each is read again in pieces of a few KiB, which cuts
launches, tables and rule messages across pieces, and the frames must be equal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from ncu_advisor.analysis.metric_use import lean_reading
from ncu_advisor.cli import analyze as analyze_cli
from ncu_advisor.cli import main
from ncu_advisor.errors import ReportParseError
from ncu_advisor.readers import csv_export, text
from ncu_advisor.readers.common import base_suffix
from ncu_advisor.readers.dispatch import _read_form

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "sample_reports"


def _streamed_captures() -> list[Path]:
    """Every capture of the details, summary or text form (one of each name); no logs."""
    out = []
    for path in sorted(REPORTS.rglob("*")):
        name = path.name.removesuffix(".gz").removesuffix(".xz")
        if "logs" in path.relative_to(REPORTS).parts or name in ("host.txt", "pytest_gpu.txt"):
            continue  # what the machines printed, not exports
        if path.is_file() and (name.endswith(".txt")
                               or name.endswith(".csv") and ".raw" not in name
                               and ".source" not in name and ".session" not in name):
            out.append(path)
    return out


def _one_per_form(paths: list[Path]) -> list[Path]:
    """The first and the largest capture of each folder and form (name suffixes, gzip or not).

    Reading in pieces exercises the reader's code for a form, not a capture's numbers
    (every capture is analyzed in every form by test_every_capture and, read lean, below):
    one small and one large input of each form cut across pieces is the test.
    """
    groups: dict[tuple, list[Path]] = {}
    for path in paths:
        suffixes = "".join([s for s in path.suffixes if s not in (".gz", ".xz")][-2:])
        groups.setdefault((path.parent, suffixes, path.suffix in (".gz", ".xz")), []).append(path)
    chosen = {p for group in groups.values() for p in (group[0], max(group, key=_size))}
    return [p for p in paths if p in chosen]


def _size(path: Path) -> int:
    return path.stat().st_size


CAPTURES = _streamed_captures()
PIECEWISE = _one_per_form(CAPTURES)


def _read(path: Path, lean: bool):
    try:
        form, report = _read_form(path, **(lean_reading() if lean else {}))
    except ReportParseError as exc:
        return ("error", str(exc))
    return (form, report)


def _same(a, b) -> None:
    assert a[0] == b[0]
    if a[0] == "error":
        assert a == b
        return
    ra, rb = a[1], b[1]
    pd.testing.assert_frame_equal(ra.launches, rb.launches)
    pd.testing.assert_frame_equal(ra.metrics, rb.metrics)
    pd.testing.assert_frame_equal(ra.ncu_rules, rb.ncu_rules)
    assert ra.session == rb.session and ra.warnings == rb.warnings


def test_every_form_has_captures():
    names = " ".join(p.name for p in CAPTURES)
    assert ".txt" in names and "details" in names and "summary" in names
    assert len(CAPTURES) > 30


@pytest.mark.parametrize("path", PIECEWISE, ids=lambda p: str(p.relative_to(REPORTS)))
def test_read_in_small_pieces_is_the_same_report(path, monkeypatch):
    whole = _read(path, lean=False)
    monkeypatch.setattr(csv_export, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(text, "CHUNK_BYTES", 4096)
    _same(whole, _read(path, lean=False))


def test_a_line_longer_than_a_piece_is_read(tmp_path, monkeypatch):
    # A rule description of 20 KiB: the piece grows until the line ends (it looped before).
    src = (REPORTS / "forms" / "forms_app.import.details.csv").read_text()
    long = re.sub(r'("SOLBottleneck","OPT",")', lambda m: m[1] + "x" * 20000, src, count=1)
    path = tmp_path / "long.csv"
    path.write_text(long)
    whole = _read(path, lean=False)
    monkeypatch.setattr(csv_export, "CHUNK_BYTES", 4096)
    _same(whole, _read(path, lean=False))
    assert any(len(d) > 20000 for d in whole[1].ncu_rules["description"])


@pytest.mark.parametrize("name", ["forms_app.import.details.csv", "forms_app.live.full.txt"])
def test_a_file_cut_mid_line_in_a_later_piece(tmp_path, monkeypatch, name):
    data = (REPORTS / "forms" / name).read_bytes()
    path = tmp_path / name
    path.write_bytes(data[: len(data) * 2 // 3])
    whole = _read(path, lean=False)
    monkeypatch.setattr(csv_export, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(text, "CHUNK_BYTES", 4096)
    cut = _read(path, lean=False)
    _same(whole, cut)
    assert any("ends mid-line" in w for w in cut[1].warnings)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_utf16_text_output_is_read_in_pieces_as_its_utf8_copy(tmp_path, monkeypatch,
                                                                   encoding):
    # PowerShell's > writes UTF-16; it was decoded whole (within 2 GiB). Pieces of an odd
    # size (some end inside a character) give the Report of the UTF-8 file.
    src = REPORTS / "forms" / "forms_app.live.full.txt"
    path = tmp_path / src.name
    data = (b"\xfe\xff" if encoding.endswith("be") else b"") + src.read_text(
        encoding="utf-8").encode(encoding)
    path.write_bytes(src.read_bytes())
    utf8 = _read(path, lean=False)
    path.write_bytes(data)
    monkeypatch.setattr(text, "CHUNK_BYTES", 4095)
    _same(utf8, _read(path, lean=False))
    path.write_bytes(data[: len(data) * 2 // 3 // 2 * 2])  # cut mid-line
    assert any("ends mid-line" in w for w in _read(path, lean=False)[1].warnings)
    path.write_bytes(data[:-1])  # half a character
    assert "broken UTF-16 text" in _read(path, lean=False)[1]


def _html(args, capsys, tmp_path, name) -> str:
    out = tmp_path / name
    assert main(["analyze", *args, "-f", "html", "-o", str(out)]) == 0
    capsys.readouterr()
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "", out.read_text())


@pytest.mark.parametrize("capture", ["corpus/torch_decoder_train.raw.csv.xz",
                                     "forms/forms_app.import.raw.csv"])
def test_html_of_a_large_input_read_lean_is_the_same(capture, tmp_path, capsys, monkeypatch):
    # Above the size bound HTML reads lean, and again whole when it lists raw metrics
    # (a few launches): the page must not change either way.
    path = str(REPORTS / capture)
    whole = _html([path], capsys, tmp_path, "whole.html")
    monkeypatch.setattr(analyze_cli, "HTML_WHOLE_READ_BYTES", 0)
    assert _html([path], capsys, tmp_path, "lean.html") == whole


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    p if p in PIECEWISE else pytest.param(p, marks=pytest.mark.sweep)
    for p in CAPTURES if "summary" not in p.name], ids=lambda p: str(p.relative_to(REPORTS)))
def test_a_lean_read_analyzes_as_a_whole_read(path):
    # Details pages and text are read lean too (only the metrics the analysis uses, with
    # the rows of non-numbers and the first row of each name): the same JSON and text.
    from ncu_advisor.analysis.pipeline import analyze
    from ncu_advisor.readers import read_report
    from ncu_advisor.render.text import render_text

    outs = []
    for lean in (False, True):
        try:
            report = read_report([path], **(lean_reading() if lean else {}))
        except ReportParseError as exc:
            outs.append(str(exc))
            continue
        document = analyze(report).to_dict(include_metrics=False)
        document.pop("generated_at", None)
        outs.append((document, render_text(document), report.warnings))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("fmt", ["json", "text", "html"])
def test_which_outputs_read_lean(fmt, tmp_path, monkeypatch, capsys):
    # JSON and text always read lean; HTML only above its size bound (a raw-metric listing).
    from ncu_advisor import readers

    seen = []
    real = readers.read_report

    def spy(paths, **kwargs):
        seen.append("metrics" in kwargs)
        return real(paths, **kwargs)

    monkeypatch.setattr(readers, "read_report", spy)
    path = REPORTS / "corpus" / "torch_decoder_train.raw.csv.xz"
    assert main(["analyze", str(path), "-f", fmt, "-o", str(tmp_path / "out")]) == 0
    assert seen == [fmt != "html"]


TEXT_CAPTURES = [p for p in PIECEWISE if base_suffix(p) == ".txt"]


@pytest.mark.parametrize("lean", [False, True], ids=["whole", "lean"])
@pytest.mark.parametrize("path", TEXT_CAPTURES, ids=lambda p: str(p.relative_to(REPORTS)))
def test_text_converted_launch_by_launch_is_the_same_report(path, lean, monkeypatch):
    # The text reader converts units and labels per block of whole launches (the table
    # built whole held 2.6 GB at 1 GB of text); a block of one launch changes nothing.
    whole = _read(path, lean=lean)
    monkeypatch.setattr(text._Rows, "_BLOCK", 1)
    _same(whole, _read(path, lean=lean))


def test_a_block_that_does_not_tell_the_number_format_waits_for_one_that_does():
    # "1,234" is 1234 with a decimal point and 1.234 with a decimal comma: the first
    # block (one launch) cannot tell; the second ("0,5") says decimal comma.
    rows = text._Rows(Path("x.txt"))
    rows._BLOCK = 1
    for k, value in enumerate(("1,234", "0,5")):
        launch = text._Launch("1", "app", "host", match=None,
                              metrics=[("GPU Speed Of Light Throughput", "Duration", "us",
                                        value)])
        rows.add(k, launch)
    warnings: list[str] = []
    got = rows.finish(warnings)
    assert got["value"].tolist() == pytest.approx([1234.0, 500.0])
    assert got["text"].tolist() == ["1,234", "0,5"] and not warnings
