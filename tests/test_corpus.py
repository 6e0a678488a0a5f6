"""The blind evaluation corpus (sample_reports/corpus/, tests/data/corpus_labels.toml).

The labels are frozen: their hash is pinned here, so an edit fails until it is recorded as an
erratum (the labels file's header says how). Every launch of every capture is labelled, in
every form it was exported in. The dev split's baseline scores (BENCHMARKS.md, "Advice quality
on the blind corpus") are kept as floors; the sealed split is never scored by a test.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
from conftest import analysis_cached, read_cached

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from evaluation import load_labels, score_analysis  # noqa: E402

CORPUS = ROOT / "sample_reports" / "corpus"
LABELS_FILE = ROOT / "tests" / "data" / "corpus_labels.toml"
FROZEN_SHA256 = "224532d292fdf1cc9d7f2cfb1df09723c66cf9b92c764e63ae0ba829c3336b31"
LABELS = load_labels(LABELS_FILE)
DEV = sorted(name for name, label in LABELS.items() if label.split == "dev")
FORMS = ("live.csv.gz", "details.csv.gz", "raw.csv.gz", "txt.gz")


def test_labels_are_frozen():
    digest = hashlib.sha256(LABELS_FILE.read_bytes()).hexdigest()
    assert digest == FROZEN_SHA256, "labels changed after scoring: record an erratum"


def test_both_splits_are_there():
    splits = {label.split for label in LABELS.values()}
    assert splits == {"dev", "sealed"}
    assert all(label.first_action for label in LABELS.values())


@pytest.mark.parametrize("name", sorted(LABELS))
def test_every_launch_of_every_form_is_labelled(name):
    labelled = sorted(LABELS[name].launches)
    for form in FORMS:
        report = read_cached(CORPUS / f"{name}.{form}")
        assert sorted(int(i) for i in report.launches["id"]) == labelled, form


def _dev_score(form: str):
    total = None
    for name in DEV:
        ours, _ = score_analysis(LABELS[name], analysis_cached(CORPUS / f"{name}.{form}"), name)
        total = ours if total is None else (total.add(ours) or total)
    return total


# (form, true positives at least, false positives at most): the baseline of 2026-12-01.
@pytest.mark.parametrize("form, tp, fp", [
    ("details.csv.gz", 26, 21),
    pytest.param("raw.csv.gz", 18, 34, marks=pytest.mark.slow),
])
def test_dev_scores_do_not_fall(form, tp, fp):
    score = _dev_score(form)
    assert score.true_positives >= tp, score.missed_cases
    assert score.false_positives <= fp, score.false_positive_cases


def test_every_applied_fix_names_launches_of_its_capture():
    import tomllib

    fixes = tomllib.loads((ROOT / "tests" / "data" / "corpus_fixes.toml").read_text())["fix"]
    assert len(fixes) >= 15
    for fix in fixes:
        assert fix["before"] in LABELS, fix["name"]
        launches = LABELS[fix.get("after", fix["before"])].launches
        assert set(fix["before_launches"]) <= set(LABELS[fix["before"]].launches), fix["name"]
        assert set(fix["after_launches"]) <= set(launches), fix["name"]
