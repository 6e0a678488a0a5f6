"""A folder of many one-launch exports: linear time, one duplicate entry per group (issue 25).

A folder of 10,000 one-launch CSVs did not finish in 600 s (500/1k/2k files: 44/84/215 s,
0.33/0.73/2.4 GB): every pair of inputs was compared for duplicates, and each pair of copies
gave an entry of its own. The folders are generated from a real capture
(``benchmarks/generate.py``, ``one_launch_files``); times and memory at 1k/2k/10k files are
in BENCHMARKS.md, not asserted here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ncu_advisor.analysis.pipeline import analyze
from ncu_advisor.readers import read_report

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "sample_reports" / "forms" / "forms_app.import.raw.csv"
sys.path.insert(0, str(ROOT / "benchmarks"))
from generate import one_launch_files  # noqa: E402


def _entries(analysis, check):
    return [e for e in analysis.validity if e["check"] == check]


def test_copies_of_one_launch_give_one_duplicate_entry_per_group(tmp_path):
    # 36 one-launch files cycling through the capture's 9 launches: 9 groups of 4 copies.
    # Compared pair by pair, that was 9 x 6 = 54 entries (5.5 million at 10,000 files).
    one_launch_files(RAW, tmp_path / "f", files=36)
    analysis = analyze(read_report([tmp_path / "f"]))
    dups = _entries(analysis, "duplicate-launches")
    assert len(dups) == 9
    assert all("counted 4 times" in e["message"] and "2 other input(s)" in e["message"]
               for e in dups)


def test_two_copies_are_named_both(tmp_path):
    one_launch_files(RAW, tmp_path / "f", files=10)  # launch 0 twice: files 0 and 9
    (entry,) = _entries(analyze(read_report([tmp_path / "f"])), "duplicate-launches")
    assert "generated_00000.raw.csv and " in entry["message"]
    assert "generated_00009.raw.csv hold the same 1 launch(es)" in entry["message"]
    assert "counted twice" in entry["message"]


@pytest.mark.slow
def test_a_folder_of_300_one_launch_files_is_analyzed(tmp_path):
    # Past _FOLD_PARTS (256) files; the time and memory of 10,000 are benchmarks/bench_scale.py's.
    one_launch_files(RAW, tmp_path / "f", files=300)
    analysis = analyze(read_report([tmp_path / "f"]))
    assert len(analysis.report.launches) == 300
    assert len(_entries(analysis, "duplicate-launches")) == 9


def _same_report(a, b) -> None:
    import pandas as pd

    for table in ("launches", "metrics", "ncu_rules", "source_lines"):
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table))
    assert (a.session, a.sources, a.warnings) == (b.session, b.sources, b.warnings)


# ~25 s over its three folders: each read twice, folded and whole.
@pytest.mark.slow
@pytest.mark.parametrize("folder", ["forms", "demos", "generated"])
def test_reports_folded_as_they_are_read_are_the_same_report(tmp_path, monkeypatch, folder):
    # Reading a folder folds the Reports read so far into one past _FOLD_PARTS (their pandas
    # overhead was ~0.3 MB a file): folding after every two files changes nothing.
    from ncu_advisor.readers import dispatch

    if folder == "generated":
        path = tmp_path / "f"
        one_launch_files(RAW, path, files=12)
    else:
        path = ROOT / "sample_reports" / folder
    whole = read_report([path])
    monkeypatch.setattr(dispatch, "_FOLD_PARTS", 2)
    _same_report(whole, read_report([path]))
