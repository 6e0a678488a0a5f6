"""The same launch gets the same advice from every export form, up to what the form can show.

For every capture kept in several forms (the demo pairs re-captured with source, the foreign
programs), the medium/high finding categories of each launch from the details page alone must
match those from the raw page: a category one form reports and the other does not must be
listed as not evaluated there (that form lacks the metrics), never silently missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from evaluation import not_evaluated_categories, reported_categories  # noqa: E402

from ncu_advisor import analyze, read_report  # noqa: E402

PAIRS = sorted(
    (p.parent, p.name.split(".")[0])
    for folder in ("demos_lineinfo", "foreign")
    for p in (ROOT / "sample_reports" / folder).glob("*.details.csv*")
    if "nvtx-rename" not in p.name and ".bad." not in p.name and ".good." not in p.name
)
FAST = {"coalescing", "bank-conflicts", "local-memory", "torch_ops"}


def _categories(files):
    analysis = analyze(read_report(files))
    # Any severity but info: a form with weaker evidence may rank a finding lower (its
    # confidence says why), but must not lose its category.
    found = reported_categories(analysis, ("high", "medium", "low"))
    return ({launch: set(cats) for launch, cats in found.items()},
            not_evaluated_categories(analysis))


def _check(folder: Path, name: str) -> None:
    details = sorted(folder.glob(f"{name}.details.csv*"))[:1]
    raw = sorted(folder.glob(f"{name}.raw.csv*"))[:1]
    if not raw:
        pytest.skip(f"{name}: no raw export kept")
    d_found, d_skipped = _categories(details)
    r_found, r_skipped = _categories(raw)
    for launch in set(d_found) | set(r_found):
        only_raw = r_found.get(launch, set()) - d_found.get(launch, set())
        only_details = d_found.get(launch, set()) - r_found.get(launch, set())
        assert only_raw <= d_skipped.get(launch, set()), (
            f"{name} #{launch}: the raw page shows {only_raw}, the details page neither shows "
            "nor lists them as not evaluated")
        assert only_details <= r_skipped.get(launch, set()), (
            f"{name} #{launch}: the details page shows {only_details}, the raw page does not")


@pytest.mark.parametrize("folder,name", [p for p in PAIRS if p[1] in FAST],
                         ids=[f"{p[0].name}/{p[1]}" for p in PAIRS if p[1] in FAST])
def test_same_categories_details_and_raw(folder, name):
    _check(folder, name)


@pytest.mark.slow
@pytest.mark.parametrize("folder,name", [p for p in PAIRS if p[1] not in FAST],
                         ids=[f"{p[0].name}/{p[1]}" for p in PAIRS if p[1] not in FAST])
def test_same_categories_details_and_raw_all(folder, name):
    _check(folder, name)
