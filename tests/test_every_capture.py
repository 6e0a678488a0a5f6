"""Every real capture in the repository analyzes end to end into valid JSON and HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import analysis_cached, read_cached

from ncu_advisor import ReportParseError, read_report
from ncu_advisor.render.html import render_html
from ncu_advisor.render.text import render_text

ROOT = Path(__file__).resolve().parent.parent
# Notes and logs beside the captures: what the machine reported, pytest's output, ncu's own
# messages of each run (no results), ncu-advise's printed output in docs/examples.
NOT_CAPTURES = re.compile(r"(^|/)(logs/|host\.txt$|pytest_gpu\.txt$|[^/]*\.out\.txt$)")
# Pages that hold no launches: read alone they are a one-line error, beside a details export
# of the same capture they add to it.
PAGES = re.compile(r"\.(session|source)\.(csv|txt)(\.gz)?$")


def _form(path: Path) -> str:
    """The name's form, below a .gz: .csv, .ncu-rep, .txt or other."""
    suffixes = [s for s in path.suffixes if s != ".gz"]
    return suffixes[-1] if suffixes else ""


_ALL = sorted(p for folder in ("sample_reports", "docs/examples")
              for p in (ROOT / folder).rglob("*")
              if p.is_file() and _form(p) in (".csv", ".ncu-rep", ".txt")
              and not NOT_CAPTURES.search(p.relative_to(ROOT).as_posix()))
CAPTURES = [p for p in _ALL if not PAGES.search(p.name)]
PAGE_FILES = [p for p in _ALL if PAGES.search(p.name)]


def _inputs(path: Path) -> Path | list[Path]:
    """A source page names no launch: it is read with the details export of its capture."""
    if path.name.endswith(".source.csv"):
        return [path.with_name(path.name.replace(".source.csv", ".details.csv")), path]
    return path


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


# The per-variant raw exports (NAME.bad.raw / NAME.good.raw) repeat the launches of NAME.raw,
# which stays in the quick run; a raw page takes seconds to analyze and render.
_SLOW = re.compile(r"\.(bad|good)\.raw\.csv(\.gz)?$")


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.slow) if _SLOW.search(p.name) else p for p in CAPTURES],
    ids=_ids(CAPTURES))
def test_capture_analyzes(path):
    # Read and analyzed once per test run (conftest), shared with the other modules.
    report = read_cached(_inputs(path))
    data = analysis_cached(_inputs(path)).to_dict()
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN or inf anywhere
    assert len(data["kernels"]) == len(report.launches) > 0
    assert render_text(data).startswith("ncu-advise:")


def _form_of_folder(path: Path) -> tuple[str, str]:
    """(folder, export form): ``demos_lineinfo``, ``.raw.csv`` (the name's last suffixes)."""
    suffixes = [s for s in path.suffixes if s != ".gz"][-2:]
    return path.parent.relative_to(ROOT).as_posix(), "".join(suffixes)


# The HTML page of a capture takes ~0.2 s: the quick run renders the first capture of each
# folder and form, the slow run every one.
_HTML_FIRST = {}
for _p in CAPTURES:
    _HTML_FIRST.setdefault(_form_of_folder(_p), _p)


@pytest.mark.parametrize("path", [
    p if p in _HTML_FIRST.values() and not _SLOW.search(p.name)
    else pytest.param(p, marks=pytest.mark.slow) for p in CAPTURES], ids=_ids(CAPTURES))
def test_capture_renders_html(path):
    report = read_cached(_inputs(path))
    if len(report.launches) > 30:  # the probes' 499 launches make a large page; text suffices
        return
    assert "<html" in render_html(analysis_cached(_inputs(path)).to_dict())


@pytest.mark.parametrize("path", PAGE_FILES, ids=_ids(PAGE_FILES))
def test_session_and_source_pages(path):
    page = PAGES.search(path.name)[1]
    with pytest.raises(ReportParseError) as err:
        read_report(path)
    assert str(err.value).startswith(f"{path}: a --page {page} export")
    assert "\n" not in str(err.value)
    details = next(path.parent.glob(PAGES.sub("", path.name) + ".details.csv*"))
    if path.name.endswith((".txt", ".txt.gz")):
        return  # a plain-text source page cannot be read beside anything
    merged = read_cached([details, path])
    alone = read_cached(details)
    assert len(merged.launches) == len(alone.launches)
    if page == "session":
        assert merged.session["ncu_command"].split()[0].endswith("ncu")
    json.dumps(analysis_cached([details, path]).to_dict(), allow_nan=False)


def test_there_are_captures():
    assert len(CAPTURES) >= 150
    forms = {_form(p) + (".gz" if p.suffix == ".gz" else "") for p in CAPTURES}
    assert forms == {".csv", ".csv.gz", ".ncu-rep", ".txt", ".txt.gz"}
    assert len(PAGE_FILES) >= 9  # 1 session, 4 source CSV, 4 source text
