"""Regression cases of the second hardening round: each input once gave an internal error
(exit 70) or a hang; each now gives its result or one line and exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ncu_advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
DETAILS = ROOT / "sample_reports" / "demos" / "coalescing.details.csv"
OCC_REP = ROOT / "sample_reports" / "occupancy" / "occ_sweep.ncu-rep"


def _one_line_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ncu-advise: error:"), err
    return err


def _rule_problem(argv, capsys) -> str:
    """``rules --check`` found a problem: one line for it, one summary line, exit 1."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and err.endswith("ncu-advise: error: 1 problem(s) in rule "
                                                 "files\n"), err
    return err


def test_diff_of_a_report_without_durations_with_itself(capsys):
    assert main(["diff", str(OCC_REP), str(OCC_REP)]) == 0
    assert "no change" in capsys.readouterr().out


@pytest.mark.parametrize("text, says", [
    (b"patterns = 5\n", "unknown key"),
    (b'[[origin]]\nid = "x"\nlabel = "x"\npatterns = 5\n', "list of strings"),
    (b'[origin]\nid = "x"\n', "array of tables"),
    (b'[[origin]]\nid = "x"\npatterns = ["^x"]\ncolour = "red"\n', "unknown field"),
    (b"\xff\xfe\x00bad", "UTF-8"),
    (b'[[origin]]\nid = "x"\npatterns = ["^(a+)+$"]\n', "exponential"),
])
def test_a_bad_origins_file_is_one_line(tmp_path, capsys, text, says):
    origins = tmp_path / "origins.toml"
    origins.write_bytes(text)
    assert says in _one_line_error(["analyze", str(DETAILS), "--origins", str(origins)], capsys)


def _run(args, cwd, timeout=60):
    return subprocess.run([sys.executable, "-m", "ncu_advisor.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_never_blocks(tmp_path):
    os.mkfifo(tmp_path / "x.csv")
    done = _run(["analyze", "x.csv"], tmp_path)
    assert done.returncode == 2 and "not a regular file" in done.stderr
    rules = tmp_path / "rules"
    rules.mkdir()
    os.mkfifo(rules / "x.toml")
    assert _run(["analyze", str(DETAILS), "--rules", str(rules)], tmp_path).returncode == 0


def test_a_file_name_that_is_not_utf8(tmp_path):
    name = os.fsdecode(b"bad\xffname.csv")
    shutil.copyfile(DETAILS, tmp_path / name)
    done = _run(["analyze", name, "-f", "json", "-o", "out.json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "bad\ufffdname.csv" in (tmp_path / "out.json").read_text(encoding="utf-8")


def _rule_text(when: str, title: str = "t") -> str:
    return (f'id = "coalescing.made-here"\ncategory = "coalescing"\ntitle = "{title}"\n'
            'confidence = "low"\nexplanation = "e"\nfix = "f"\nrequires = ["mem_pct"]\n'
            f'when = {when}\n[[severity]]\nlevel = "low"\n')


@pytest.mark.parametrize("depth", [40, 400])
def test_a_condition_nested_too_deep_is_a_rule_problem(tmp_path, capsys, depth):
    cond = '{ q = "mem_pct", ge = 1 }'
    for _ in range(depth):
        cond = "{ all = [" + cond + "] }"
    (tmp_path / "coalescing.made-here.toml").write_text(_rule_text(cond))
    assert "levels deep" in _rule_problem(["rules", "--check", str(tmp_path)], capsys)


def test_a_format_width_bomb_is_refused_before_it_runs(tmp_path, capsys):
    (tmp_path / "coalescing.made-here.toml").write_text(
        _rule_text('{ all = [{ q = "mem_pct", ge = 0 }] }', title="x {mem_pct:>999999999}"))
    assert "more than 64" in _rule_problem(["rules", "--check", str(tmp_path)], capsys)
    assert "more than 64" in _one_line_error(
        ["analyze", str(DETAILS), "--rules", str(tmp_path)], capsys)


def test_a_negative_duration_is_not_a_time(tmp_path, capsys):
    """A details page whose first launch lasts -49 us (edited here): no negative total, no
    negative saving, and a warning naming the launch."""
    text = DETAILS.read_text()
    row = next(ln for ln in text.splitlines() if '"Duration"' in ln)
    value = row.rsplit('","', 2)[-1].rstrip('",')
    edited = text.replace(row, row.replace(f'"{value}"', f'"-{value}"'), 1)
    path = tmp_path / "negative-duration.details.csv"
    path.write_text(edited)
    import json

    assert main(["analyze", str(path), "-f", "json", "-o", str(tmp_path / "out.json")]) == 0
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["summary"]["total_duration_ns"] >= 0
    assert any("negative duration" in w for w in doc["warnings"])
    assert all((f.get("estimated_saving_ns") or 0) >= 0 for f in doc["findings"])
