"""Advice quality on labelled captures, per export form and split (../shared/EVALUATION.md).

Sets: ``corpus`` (sample_reports/corpus/, the blind evaluation corpus: labels in
tests/data/corpus*_labels.toml, dev and sealed programs, splits as corpus_splits.toml moved
them), and the older dev sets ``foreign``
and ``holdout``. For each form a capture was exported in, every labelled capture is analysed
and scored (benchmarks/evaluation.py): strict and lenient precision of medium/high findings,
slot and group recall, first-action agreement, and Nsight Compute's own rules on the same
launches. ``--fixes`` adds the estimated against the measured saving of every applied fix.

    python benchmarks/advice_quality.py [--set corpus|foreign|holdout] [--split dev|sealed|all]
                                        [--forms details,raw,...] [--fixes] [--cases] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tomllib
from functools import cache, partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluation import (  # noqa: E402
    BEFORE_LAYOUT,
    DATA,
    Tally,
    estimated_saving_ns,
    load_corpus_labels,
    load_labels,
    score_analysis,
)

from ncu_advisor import analyze, read_report  # noqa: E402
from ncu_advisor.errors import ReportParseError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Set name -> (its captures' folder, the function that loads its labels).
SETS = {"corpus": (ROOT / "sample_reports" / "corpus", load_corpus_labels),
        "foreign": (ROOT / "sample_reports" / "foreign",
                    partial(load_labels, DATA / "foreign_labels.toml", BEFORE_LAYOUT)),
        "holdout": (ROOT / "sample_reports" / "holdout",
                    partial(load_labels, DATA / "holdout_labels.toml", BEFORE_LAYOUT))}
FIXES = DATA / "corpus_fixes.toml"
# Form name -> file-name patterns (relative to the capture's stem).
FORMS = {
    "live": ["{n}.live.csv*"],
    "details": ["{n}.details.csv*"],
    "text": ["{n}.txt*"],
    "raw": ["{n}.raw.csv*"],
    "raw+details": ["{n}.raw.csv*", "{n}.details.csv*"],
    "ncu-rep": ["{n}.ncu-rep"],
}
WITH_NCU_RULES = {"live", "details", "text", "raw+details", "ncu-rep"}


def files_for(folder: Path, capture: str, form: str) -> list[Path] | None:
    """The files of one capture in one form (None when that form was not kept)."""
    out = []
    for pattern in FORMS[form]:
        found = sorted(folder.glob(pattern.format(n=capture)))
        if not found:
            return None
        out.append(found[0])
    return out


@cache
def analysis_of(files: tuple[Path, ...]):
    """The analysis of one capture in one form (read once per run)."""
    return analyze(read_report(list(files)))


def measure(which: str, split: str = "all", forms: list[str] | None = None) -> dict:
    """Scores per form: {form: {"ncu-advise": Tally, "ncu rules": Tally, "captures": n}}."""
    folder, labels_of = SETS[which]
    labels = labels_of()
    results: dict[str, dict] = {}
    for form in forms or list(FORMS):
        ours, theirs, captures = Tally(), Tally(), 0
        for name, label in labels.items():
            if split != "all" and label.split != split:
                continue
            files = files_for(folder, name, form)
            if files is None:
                continue
            try:
                analysis = analysis_of(tuple(files))
            except ReportParseError as e:  # a form this version cannot read: say so
                print(f"{name}/{form}: not read: {e}", file=sys.stderr)
                continue
            captures += 1
            mine, baseline = score_analysis(label, analysis, f"{name}/{form}")
            ours.add(mine)
            theirs.add(baseline)
        if captures:
            results[form] = {"ncu-advise": ours, "captures": captures}
            if form in WITH_NCU_RULES:
                results[form]["ncu rules"] = theirs
    return results


def _total_ns(analysis, launch_ids: list[int] | None = None) -> float:
    table = analysis.report.launches
    if launch_ids is not None:
        table = table[table["id"].isin(launch_ids)]
    return float(table["duration_ns"].sum())


def fix_savings(split: str = "all", form: str = "raw") -> list[dict]:
    """Estimated and measured saving of every applied fix in corpus_fixes.toml.

    Two kinds of fix. In-program pairs (``before_launches``/``after_launches``): measured is
    the GPU time of those launches before minus after, from the captures (ncu's durations).
    Program variants (``wall``, no launch lists): the estimate is the category's saving over
    the whole baseline capture, measured is the median step time before minus after
    (sample_reports/corpus/timings.jsonl, no ncu); a capture cut by the profiling limit holds
    part of the step, so its estimate covers that part only (``cut`` says so).
    """
    folder, labels_of = SETS["corpus"]
    labels = labels_of()
    fixes = tomllib.loads(FIXES.read_text(encoding="utf-8"))["fix"]
    timings = {}
    timing_file = folder / "timings.jsonl"
    if timing_file.exists():
        for line in timing_file.read_text().splitlines():
            row = json.loads(line)
            timings[(row["program"], row["variant"])] = row["median_ms"]
    out = []
    for fix in fixes:
        program = labels.get(fix["before"])
        if program is None or (split != "all" and program.split != split):
            continue
        before = files_for(folder, fix["before"], form)
        if before is None:
            continue
        a = analysis_of(tuple(before))
        ids_before = fix.get("before_launches")
        estimate = estimated_saving_ns(a, fix["category"], ids_before)
        row = {"fix": fix["name"], "category": fix["category"], "split": program.split,
               "estimated_ns": estimate, "measured_ns": None, "ratio": None,
               "cut": bool(fix.get("cut", False))}
        if ids_before is not None:
            after = files_for(folder, fix.get("after", fix["before"]), form)
            if after is None:
                continue
            b = analysis_of(tuple(after))
            row["measured_ns"] = _total_ns(a, ids_before) - _total_ns(b, fix["after_launches"])
        wall = fix.get("wall")
        if wall and all(tuple(k) in timings for k in wall):
            row["measured_wall_ns"] = 1e6 * (timings[tuple(wall[0])] - timings[tuple(wall[1])])
        measured = row["measured_ns"] if ids_before is not None else row.get("measured_wall_ns")
        if measured is not None and measured > 0:
            row["ratio"] = estimate / measured
        out.append(row)
    return out


def fix_summary(fixes: list[dict]) -> list[str]:
    """Per category of change, and over all: the median ratio of estimated to measured saving,
    how many fixes are within a factor 1.5, and the worst (issue 23's "savings that hold").

    Only fixes with a ratio count: a fix with no estimate (no rule names its problem) is a
    miss, listed in the table above, not an estimator's error.
    """
    by: dict[str, list[dict]] = {}
    for f in fixes:
        if f["ratio"] is not None and f["ratio"] > 0:
            by.setdefault(f["category"], []).append(f)
            by.setdefault("all", []).append(f)
    lines = ["| category | fixes with a ratio | median ratio | within 1.5x | worst |",
             "|---|---|---|---|---|"]
    for category in sorted(by, key=lambda c: (c == "all", c)):
        rows = by[category]
        ratios = [f["ratio"] for f in rows]
        n = len(ratios)
        median = statistics.median(ratios)
        within = sum(1 for r in ratios if 1 / 1.5 <= r <= 1.5)
        worst = max(rows, key=lambda f: abs(math.log(f["ratio"])))
        lines.append(f"| {category} | {n} | {median:.2f} | {within}/{n} | "
                     f"{worst['ratio']:.2f} ({worst['fix']}) |")
    return lines


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def table(results: dict) -> list[str]:
    """The markdown table of one measure() result."""
    lines = ["| form | advice from | captures | TP | FP | debatable | slots found / all "
             "| not evaluated | strict precision | lenient precision | slot recall "
             "| group recall | first action |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for form, r in results.items():
        for who in ("ncu-advise", "ncu rules"):
            if who not in r:
                continue
            t: Tally = r[who]
            first = (f"{t.first_action_agree}/{t.programs}" if who == "ncu-advise" else "")
            lines.append(
                f"| {form} | {who} | {r['captures']} | {t.true_positives} | "
                f"{t.false_positives} | {t.debatable} | {t.slots_found}/{t.slots} | "
                f"{t.not_evaluated} | {_pct(t.strict_precision)} | "
                f"{_pct(t.lenient_precision)} | {_pct(t.slot_recall)} | "
                f"{len(t.groups_found)}/{len(t.groups)} ({_pct(t.group_recall)}) | {first} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", default="corpus", choices=list(SETS))
    p.add_argument("--split", default="all", choices=["all", "dev", "sealed"])
    p.add_argument("--forms", default=",".join(FORMS))
    p.add_argument("--fixes", action="store_true", help="estimated vs measured savings")
    p.add_argument("--cases", action="store_true", help="list every error")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    results = measure(args.set, args.split, args.forms.split(","))
    fixes = fix_savings(args.split) if args.fixes else []
    if args.json:
        print(json.dumps({"set": args.set, "split": args.split,
                          "forms": {form: {who: (t.summary() | {
                              "false_positives": t.false_positive_cases,
                              "debatable": t.debatable_cases, "misses": t.missed_cases,
                              "first_action": t.first_action_cases})
                                           for who, t in r.items() if who != "captures"}
                                    for form, r in results.items()},
                          "fixes": fixes}, indent=1))
        return 0
    print(f"set {args.set}, split {args.split}\n")
    print("\n".join(table(results)))
    if fixes:
        print("\n| fix | category | split | estimated | measured (captures) | ratio "
              "| measured (wall) |\n|---|---|---|---|---|---|---|")
        for f in fixes:
            wall = f.get("measured_wall_ns")
            ratio = f"{f['ratio']:.2f}" if f["ratio"] is not None else "n/a"
            captured = f["measured_ns"]
            print(f"| {f['fix']}{' (capture cut)' if f['cut'] else ''} | {f['category']} | "
                  f"{f['split']} | {f['estimated_ns'] / 1e3:,.1f} us | "
                  f"{'' if captured is None else f'{captured / 1e3:,.1f} us'} | "
                  f"{ratio} | {'' if wall is None else f'{wall / 1e3:,.1f} us'} |")
        print()
        print("\n".join(fix_summary(fixes)))
    if args.cases:
        for form, r in results.items():
            t = r["ncu-advise"]
            print(f"\n### {form}\n")
            for title, cases in (("false positives", t.false_positive_cases),
                                 ("debatable", t.debatable_cases),
                                 ("misses", t.missed_cases),
                                 ("first action", t.first_action_cases)):
                if cases:
                    print(f"{title} ({len(cases)}):")
                    print("\n".join(f"- {c}" for c in cases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
