"""diff states speedups only between runs captured alike (issue 25): another GPU, ncu
version, clock or cache control, or section set is inconclusive (exit 3) unless --force; a
launch without a duration never pushes a 0% change outside the noise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncu_advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "sample_reports" / "demos" / "coalescing.raw.csv"
DETAILS = ROOT / "sample_reports" / "demos" / "coalescing.details.csv"
SESSION = ROOT / "sample_reports" / "foreign" / "torch_ops.session.csv"


def _other_gpu(tmp_path) -> Path:
    path = tmp_path / "h100.raw.csv"
    path.write_text(RAW.read_text().replace("NVIDIA H200", "NVIDIA H100 80GB HBM3"))
    return path


def test_two_gpus_are_inconclusive(tmp_path, capsys):
    assert main(["diff", str(RAW), str(_other_gpu(tmp_path)), "-f", "json"]) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["verdict"] == "inconclusive" and "speedup" not in doc
    assert any("GPU differs" in r for r in doc["not_comparable"])
    assert "inconclusive" in captured.err


def test_force_compares_anyway_and_says_so(tmp_path, capsys):
    assert main(["diff", str(RAW), str(_other_gpu(tmp_path)), "--force", "-f", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["comparable"] is False and doc["speedup"] == pytest.approx(1.0)
    assert "--force" in captured.err


def test_two_ncu_versions_or_clock_controls_are_inconclusive(tmp_path, capsys):
    text = SESSION.read_text()
    assert "2025.3.1" in text and "--clock-control none" in text
    for i, edited in enumerate((text.replace("2025.3.1", "2026.1.0"),
                                text.replace("--clock-control none", "--clock-control base"))):
        page = tmp_path / f"s{i}" / "x.session.csv"
        page.parent.mkdir()
        page.write_text(edited)
        (page.parent / RAW.name).write_text(RAW.read_text())
        before = tmp_path / "b"
        before.mkdir(exist_ok=True)
        (before / "x.session.csv").write_text(text)
        (before / RAW.name).write_text(RAW.read_text())
        assert main(["diff", str(before), str(page.parent)]) == 3
        out = capsys.readouterr().out
        assert ("ncu version" if i == 0 else "clock control") in out


def test_other_sections_are_inconclusive(tmp_path, capsys):
    fewer = tmp_path / "fewer.details.csv"
    fewer.write_text("".join(ln for ln in DETAILS.read_text().splitlines(keepends=True)
                             if '"Occupancy"' not in ln))
    assert main(["diff", str(DETAILS), str(fewer)]) == 3
    assert "sections differ" in capsys.readouterr().out


def test_the_same_run_is_comparable(capsys):
    assert main(["diff", str(DETAILS), str(DETAILS), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["comparable"] is True


def test_a_missing_duration_keeps_a_zero_change_inside_the_noise(tmp_path, capsys):
    lines = DETAILS.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if '"Duration"' in ln)
    path = tmp_path / "no-duration.details.csv"
    path.write_text("".join(lines[:cut] + lines[cut + 1:]))
    assert main(["diff", str(path), str(path), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["change_pct"] == 0 and doc["within_noise"] is True
