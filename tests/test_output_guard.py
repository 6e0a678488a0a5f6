"""One output guard for every command that writes a file: never over an input, a rule file,
an origins table, a repeat or a store (the inputs-destroyed cases of the hardening issue)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ncu_advisor.cli import main

ROOT = Path(__file__).resolve().parent.parent
DETAILS = ROOT / "sample_reports" / "demos" / "coalescing.details.csv"
RAW = ROOT / "sample_reports" / "demos" / "coalescing.raw.csv"
RULE = ROOT / "rules" / "coalescing.global-loads.toml"


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    shutil.copyfile(DETAILS, a)
    shutil.copyfile(DETAILS, b)
    (tmp_path / "x").mkdir()
    return tmp_path


def _refused(argv, protected: Path, capsys) -> None:
    before = protected.read_bytes() if protected.is_file() else None
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing" in err, err
    if before is not None:
        assert protected.read_bytes() == before


@pytest.mark.parametrize("target", ["a.csv", "b.csv", "./x/../a.csv", "link.csv"])
def test_diff_never_writes_over_before_or_after(work, target, capsys):
    (work / "link.csv").symlink_to(work / "b.csv")
    _refused(["diff", "a.csv", "b.csv", "-o", target], work / "a.csv", capsys)


def test_diff_never_writes_over_a_repeat(work, capsys):
    shutil.copyfile(DETAILS, work / "rep.csv")
    _refused(["diff", "a.csv", "b.csv", "--before-repeat", "rep.csv", "-o", "rep.csv"],
             work / "rep.csv", capsys)


def test_analyze_never_writes_into_a_rule_folder_or_over_origins(work, capsys):
    rules = work / "myrules"
    rules.mkdir()
    shutil.copyfile(RULE, rules / "mine.global-loads.toml")
    (rules / "mine.global-loads.toml").write_text(
        (rules / "mine.global-loads.toml").read_text().replace(
            'id = "coalescing.global-loads"', 'id = "mine.global-loads"'))
    _refused(["analyze", "a.csv", "--rules", str(rules), "-o",
              str(rules / "mine.global-loads.toml")], rules / "mine.global-loads.toml", capsys)
    origins = work / "origins.toml"
    origins.write_text('[[origin]]\nid = "mylib"\nlabel = "My library"\npatterns = ["^mylib_"]\n')
    _refused(["analyze", "a.csv", "--origins", str(origins), "-o", str(origins)], origins,
             capsys)


def test_query_and_trend_never_write_into_the_store(work, capsys):
    store = work / "store"
    assert main(["ingest", str(RAW), "--store", str(store)]) == 0
    capsys.readouterr()
    marker = store / "ncu-advise-store.json"
    _refused(["query", "--store", str(store), "select 1", "-o", str(marker)], marker, capsys)
    part = next(store.glob("launches/*/part-0.parquet"))
    _refused(["trend", "--store", str(store), "-o", str(part)], part, capsys)


def test_an_ordinary_output_is_still_written(work, capsys):
    assert main(["diff", "a.csv", "b.csv", "-o", "out.txt"]) == 0
    assert (work / "out.txt").stat().st_size > 0


def test_a_report_may_be_written_beside_a_rule_folders_rules(work, capsys):
    rules = work / "myrules"
    rules.mkdir()
    assert main(["analyze", "a.csv", "--rules", str(rules), "-o", str(rules / "report.txt")]) == 0
    assert (rules / "report.txt").stat().st_size > 0
