"""Each launch's limiter (derive/limiter.py) against Nsight Compute's own bottleneck.

For every capture of the corpus (and the dev sets), the limiter from the raw page and from
the details page, beside the verdict of ncu's SOLBottleneck rule on the same launch (read
from the details page's rule rows): memory, compute, latency, small grid, or high throughput
(both units >= 80%). Prints the agreement per form and every disagreement with both sides.

    python benchmarks/limiter_agreement.py [--set corpus|foreign|holdout] [--all]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from advice_quality import SETS, files_for  # noqa: E402

from ncu_advisor import analyze, read_report  # noqa: E402

# Our limiter kinds as ncu's SOL classes.
OURS = {"memory": "memory", "pipe": "compute", "issue": "compute", "latency": "latency",
        "launch-shape": "small grid", "launch-overhead": "latency", "unknown": "unknown"}


def ncu_class(description: str | None) -> str:
    """The class of one SOLBottleneck message (its text says which)."""
    text = (description or "").lower()
    if "grid" in text and "too small" in text:
        return "small grid"
    if "latency" in text or "low compute throughput and memory" in text:
        return "latency"
    if "compute is more heavily utilized" in text:
        return "compute"
    if "memory is more heavily utilized" in text:
        return "memory"
    if "balanced" in text or "greater than 80" in text:
        return "high throughput"
    return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", default="corpus", choices=list(SETS))
    p.add_argument("--all", action="store_true", help="list every launch, not only the "
                   "disagreements")
    p.add_argument("--sealed", action="store_true", help="the sealed programs alone "
                   "(only when the sealed split is scored); without it, the dev programs")
    args = p.parse_args(argv)
    folder, labels_of = SETS[args.set]
    agree: Counter = Counter()
    total: Counter = Counter()
    same_across_forms = [0, 0]
    lines, unit_lines = [], []
    for name, label in labels_of().items():
        if (label.split == "sealed") != args.sealed:
            continue  # the tool's output on a sealed capture is looked at once, when scored
        details = files_for(folder, name, "details")
        raw = files_for(folder, name, "raw")
        if details is None:
            continue
        by_form = {"details": analyze(read_report(details))}
        if raw is not None:
            by_form["raw"] = analyze(read_report(raw))
        d = by_form["details"]
        ids = d.report.launches.set_index("launch")["id"]
        rules = d.report.ncu_rules
        sol = rules[rules["rule"] == "SOLBottleneck"]
        theirs = {int(row.launch): ncu_class(row.description)
                  for row in sol.itertuples() if row.type in ("OPT", "INF")}
        for launch in ids.index:
            verdicts = {form: a.limiters[launch] for form, a in by_form.items()}
            if len(verdicts) == 2:
                same_across_forms[1] += 1
                same_across_forms[0] += verdicts["raw"].unit == verdicts["details"].unit
                if verdicts["raw"].unit != verdicts["details"].unit:
                    unit_lines.append(f"- {name} #{ids[launch]}: raw {verdicts['raw'].unit}, "
                                      f"details {verdicts['details'].unit}")
            ncu = theirs.get(int(launch), "none")
            for form, lim in verdicts.items():
                ours = OURS[lim.kind]
                total[form] += 1
                ok = ours == ncu or (ncu == "high throughput" and ours in ("memory", "compute"))
                agree[form] += ok
                if form == "raw" and (not ok or args.all):
                    lines.append(f"- {name} #{ids[launch]}: ours {lim.kind} ({lim.unit}, "
                                 f"{lim.utilization_pct or 0:.0f}%), ncu {ncu}")
    print(f"set {args.set}: limiter class against Nsight Compute's SOLBottleneck\n")
    print("| form | launches | same class as ncu |\n|---|---|---|")
    for form in total:
        share = 100 * agree[form] / total[form]
        print(f"| {form} | {total[form]} | {agree[form]} ({share:.0f}%) |")
    print(f"\nsame limiter unit from the raw and the details page: {same_across_forms[0]} of "
          f"{same_across_forms[1]} launches")
    print("\n".join(unit_lines))
    print("\ndisagreements (raw page):" if not args.all else "\nevery launch (raw page):")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
