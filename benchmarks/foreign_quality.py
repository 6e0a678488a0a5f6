"""Precision and recall of medium/high findings on labelled captures of foreign code.

Reads every labelled capture in each form it exists in, scores ncu-advise and the NCU-rules-only
baseline against the labels, and prints a markdown table. Two sets: ``foreign``
(sample_reports/foreign/, tests/data/foreign_labels.toml, the captures the rules were written
against) and ``holdout`` (sample_reports/holdout/, tests/data/holdout_labels.toml, captured and
labelled after the rules were last changed).

    python benchmarks/foreign_quality.py [--set foreign|holdout] [--json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ncu_advisor import analyze, read_report
from ncu_advisor.errors import ReportParseError
from ncu_advisor.labels import Score, load_labels, score_analysis

ROOT = Path(__file__).resolve().parent.parent
SETS = {"foreign": (ROOT / "sample_reports" / "foreign", ROOT / "tests/data/foreign_labels.toml"),
        "holdout": (ROOT / "sample_reports" / "holdout", ROOT / "tests/data/holdout_labels.toml")}
FOREIGN, LABELS = SETS["foreign"]
# Form name -> file-name patterns (relative to the capture's stem).
FORMS = {
    "details": ["{n}.details.csv*"],
    "raw": ["{n}.raw.csv*"],
    "raw+details": ["{n}.raw.csv*", "{n}.details.csv*"],
    "text": ["{n}.txt*"],
    "ncu-rep": ["{n}.ncu-rep"],
}


def files_for(capture: str, form: str, folder: Path = FOREIGN) -> list[Path] | None:
    """The files of one capture in one form (None when that form was not kept)."""
    out = []
    for pattern in FORMS[form]:
        found = sorted(folder.glob(pattern.format(n=capture)))
        if not found:
            return None
        out.append(found[0])
    return out


def measure(which: str = "foreign") -> dict[str, dict[str, Score]]:
    """Scores per form: {"form": {"ncu-advise": Score, "ncu rules": Score}}."""
    folder, labels_file = SETS[which]
    labels = load_labels(labels_file)
    results: dict[str, dict[str, Score]] = {}
    for form in FORMS:
        ours, baseline, captures = Score(), Score(), 0
        for capture, capture_labels in labels.items():
            files = files_for(capture, form, folder)
            if files is None:
                continue
            try:
                analysis = analyze(read_report(files))
            except ReportParseError:  # a form this version cannot read yet
                continue
            captures += 1
            mine, theirs = score_analysis(capture_labels, analysis, f"{capture}/{form}")
            ours.add(mine)
            baseline.add(theirs)
        if captures:
            results[form] = {"ncu-advise": ours, "captures": captures}
            if form != "raw":  # the raw page carries no rule results
                results[form]["ncu rules"] = baseline
    return results


def _row(form: str, who: str, s: Score, captures: int) -> str:
    return (f"| {form} | {who} | {captures} | {s.true_positives} | {s.false_positives} | "
            f"{s.misses} | {s.not_evaluated} | {100 * s.precision:.0f}% | {100 * s.recall:.0f}% |")


def main() -> int:
    which = sys.argv[sys.argv.index("--set") + 1] if "--set" in sys.argv else "foreign"
    results = measure(which)
    if "--json" in sys.argv:
        print(json.dumps({form: {who: {"tp": s.true_positives, "fp": s.false_positives,
                                       "miss": s.misses, "not_evaluated": s.not_evaluated,
                                       "precision": s.precision, "recall": s.recall,
                                       "false_positives": s.false_positive_cases,
                                       "misses": s.missed_cases}
                                 for who, s in r.items() if who != "captures"}
                          for form, r in results.items()}, indent=2))
        return 0
    print("| form | advice from | captures | TP | FP | missed | not evaluated | precision "
          "| recall |")
    print("|---|---|---|---|---|---|---|---|---|")
    for form, r in results.items():
        for who in ("ncu-advise", "ncu rules"):
            if who in r:
                print(_row(form, who, r[who], r["captures"]))
    for form, r in results.items():  # the baseline's lists are long: --json has them
        ours = r["ncu-advise"]
        if ours.false_positive_cases or ours.missed_cases:
            print(f"\n{form}: false positives {ours.false_positive_cases}; "
                  f"missed {ours.missed_cases}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
