"""Print which rules fire on every real capture: per demo variant, and on the other captures.

Usage: python scripts/rule_matrix.py [--quality]
--quality prints the precision/recall table of BENCHMARKS.md: for each rule, its own demo's
bad variant should fire (true positive) and its good variant should stay silent.
"""

import sys
from pathlib import Path

from ncu_advisor import analyze, read_report
from ncu_advisor.demos import list_demos
from ncu_advisor.report import subset
from ncu_advisor.rules_engine.loader import load_rules

ROOT = Path(__file__).resolve().parent.parent
DEMOS = ROOT / "sample_reports" / "demos"
OTHER = {
    "forms_app": [ROOT / "sample_reports/forms/forms_app.ncu-rep.gz"],
    "torch_mlp": [ROOT / "docs/examples/torch_mlp/torch_mlp.raw.csv",
                  ROOT / "docs/examples/torch_mlp/torch_mlp.details.csv"],
    "occ_sweep": [ROOT / "sample_reports/occupancy/occ_sweep2.ncu-rep.gz"],
}


def variant_findings(rules):
    """Yield (demo, role, kernels, set of (rule, severity)) for every demo variant."""
    for demo in list_demos():
        report = read_report([DEMOS / f"{demo.name}.raw.csv", DEMOS / f"{demo.name}.details.csv"])
        for role, variant in (("bad", demo.bad), ("good", demo.good)):
            ids = report.launches.loc[report.launches["short_name"].isin(variant.kernels),
                                      "launch"].tolist()
            result = analyze(subset(report, ids), rules=rules)
            yield demo.name, role, variant.kernels, {(f.rule, f.severity) for f in result.findings}


def main() -> None:
    rules = load_rules()
    rows = list(variant_findings(rules))
    if "--quality" in sys.argv:
        print("| rule | own demo | fires on bad | silent on good | other variants it fires on "
              "(severity) |")
        print("|---|---|---|---|---|")
        tp = fn = fp = tn = 0
        for rule in sorted(rules, key=lambda r: r.id):
            own = [r for r in rows if r[0] == rule.demo]
            bad = any(rule.id == f for _, role, _, fs in own if role == "bad" for f, _ in fs)
            good = any(rule.id == f for _, role, _, fs in own if role == "good" for f, _ in fs)
            others = sorted({f"{d}/{role} ({s})" for d, role, _, fs in rows if d != rule.demo
                             for f, s in fs if f == rule.id})
            tp += bad
            fn += not bad
            fp += good
            tn += not good
            print(f"| `{rule.id}` | {rule.demo} | {'yes' if bad else 'no'} | "
                  f"{'no' if good else 'yes'} | {', '.join(others) or '-'} |")
        print(f"\nOwn-demo cases: {tp} of {tp + fn} bad variants flagged (recall "
              f"{tp / (tp + fn):.0%}); {tn} of {fp + tn} good variants silent "
              f"(precision {tp / (tp + fp):.0%}).")
        return
    for name, role, _kernels, fs in rows:
        text = ", ".join(f"{r} ({s})" for r, s in sorted(fs)) or "-"
        print(f"{name:15} {role:4} {text}")
    for name, paths in OTHER.items():
        result = analyze(read_report(paths), rules=rules)
        fired = sorted({(f.rule, f.severity) for f in result.findings})
        print(f"{name:15} all  " + ", ".join(f"{r} ({s})" for r, s in fired))


if __name__ == "__main__":
    main()
