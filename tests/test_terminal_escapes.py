"""Kernel names are data: no output to a terminal passes their control or bidi characters
through (ESC, OSC, BEL, RLO); every text renderer escapes them through one function."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncu_advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
DETAILS = ROOT / "sample_reports" / "demos" / "coalescing.details.csv"
EVIL = "\x1b]0;owned\x07\x1b[2J\u202e"


@pytest.fixture
def evil_capture(tmp_path):
    """A real capture whose kernel names carry terminal escapes (made here, named as such)."""
    text = DETAILS.read_text()
    assert "copy" in text
    path = tmp_path / "evil-names.details.csv"
    path.write_text(text.replace("copy", "co" + EVIL + "py"))
    return path


def _clean(text: str) -> bool:
    return not any(c in text for c in "\x1b\x07\u202e")


def test_analyze_text(evil_capture, capsys):
    assert main(["analyze", str(evil_capture)]) == 0
    out = capsys.readouterr().out
    assert _clean(out) and "\\x1b" in out


def test_diff_text(evil_capture, capsys):
    assert main(["diff", str(evil_capture), str(evil_capture)]) == 0
    out = capsys.readouterr().out
    assert _clean(out) and "\\x1b" in out


def test_query_and_trend_text(evil_capture, tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["ingest", str(evil_capture), "--store", str(store)]) == 0
    assert main(["query", "--store", str(store), "select distinct name from launches"]) == 0
    assert main(["trend", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert _clean(out) and "\\x1b" in out


def test_the_unknown_command_error(capsys):
    assert main(["\x1b[31mevil"]) == 2
    err = capsys.readouterr().err
    assert _clean(err) and err.count("\n") == 1
