"""Score advice against expert labels: precision and recall of medium/high findings.

A labels file (``tests/data/foreign_labels.toml`` is the project's own) lists, per capture and
launch ID, the checklist categories an expert would raise (``problems``), those a reasonable
expert might raise (``acceptable``), and a one-line reason. A medium or high finding in a
labelled problem category is a true positive; in any other category except acceptable ones, a
false positive. A labelled problem the tool did not report is a miss, unless the tool said the
category was not evaluated on that launch (the form lacks the metrics): that is counted apart.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .analysis import Analysis
from .derive.ncu_evidence import ncu_rule_categories

COUNTED = ("high", "medium")
# Where every launch is: not a defect category of its own.
_UNCOUNTED_CATEGORIES = {"roofline", ""}


@dataclass
class Score:
    """Counts of one scoring run."""

    true_positives: int = 0
    false_positives: int = 0
    misses: int = 0
    not_evaluated: int = 0
    false_positive_cases: list[str] = field(default_factory=list)
    missed_cases: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        """TP / (TP + FP); 1.0 when nothing was reported."""
        reported = self.true_positives + self.false_positives
        return self.true_positives / reported if reported else 1.0

    @property
    def recall(self) -> float:
        """TP / (TP + misses), over the problems the form could show."""
        wanted = self.true_positives + self.misses
        return self.true_positives / wanted if wanted else 1.0

    def add(self, other: Score) -> None:
        """Accumulate another score."""
        self.true_positives += other.true_positives
        self.false_positives += other.false_positives
        self.misses += other.misses
        self.not_evaluated += other.not_evaluated
        self.false_positive_cases += other.false_positive_cases
        self.missed_cases += other.missed_cases


def load_labels(path: str | Path) -> dict[str, dict[int, dict]]:
    """Read a labels file: capture -> launch ID -> {problems, acceptable, why}."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    out: dict[str, dict[int, dict]] = {}
    for block in data["launch"]:
        out[block["capture"]] = {
            int(entry["id"]): {"problems": set(entry.get("problems", [])),
                               "acceptable": set(entry.get("acceptable", [])),
                               "why": entry.get("why", "")}
            for entry in block["labels"]}
    return out


def reported_categories(analysis: Analysis,
                        severities: tuple[str, ...] = COUNTED) -> dict[int, set[str]]:
    """Finding categories per ncu launch ID at the given severities.

    A chain finding counts on each launch of the chain.
    """
    ids = analysis.report.launches.set_index("launch")["id"]
    out: dict[int, set[str]] = {}
    for f in analysis.findings:
        if f.severity not in severities or f.category in _UNCOUNTED_CATEGORIES:
            continue
        launches = [f.launch] if f.launch is not None else f.launch_ids
        for launch in launches:
            out.setdefault(int(ids[launch]), set()).add(f.category)
    return out


def not_evaluated_categories(analysis: Analysis) -> dict[int, set[str]]:
    """Categories some rule could not evaluate, per ncu launch ID.

    An application rule (fusion chains, multi-pass reads) that could not run counts on every
    launch.
    """
    ids = analysis.report.launches.set_index("launch")["id"]
    out: dict[int, set[str]] = {}
    for n in analysis.not_evaluated:
        launches = [n.launch] if n.launch is not None else list(ids.index)
        for launch in launches:
            out.setdefault(int(ids[launch]), set()).add(n.category)
    return out


def ncu_baseline_categories(analysis: Analysis, min_speedup: float = 5.0) -> dict[int, set[str]]:
    """The NCU-rules-only baseline, per ncu launch ID.

    Each optimization message (OPT) with an estimated speedup of at least ``min_speedup`` %,
    mapped to its checklist category.
    """
    opt = ncu_rule_categories(analysis.report.ncu_rules)
    ids = analysis.report.launches.set_index("launch")["id"]
    out: dict[int, set[str]] = {}
    kept = opt[(pd.to_numeric(opt["speedup"], errors="coerce") >= min_speedup)
               & ~opt["category"].isin(list(_UNCOUNTED_CATEGORIES))]
    for launch, category in zip(kept["launch"], kept["category"], strict=True):
        out.setdefault(int(ids[launch]), set()).add(category)
    return out


def score(labels: dict[int, dict], reported: dict[int, set[str]],
          skipped: dict[int, set[str]] | None = None, where: str = "") -> Score:
    """Score one capture's reported categories against its labels."""
    result = Score()
    skipped = skipped or {}
    for launch_id, label in labels.items():
        found = reported.get(launch_id, set())
        problems, ok = label["problems"], label["acceptable"]
        result.true_positives += len(found & problems)
        for cat in sorted(found - problems - ok):
            result.false_positives += 1
            result.false_positive_cases.append(f"{where} #{launch_id} {cat}")
        for cat in sorted(problems - found):
            if cat in skipped.get(launch_id, set()):
                result.not_evaluated += 1
            else:
                result.misses += 1
                result.missed_cases.append(f"{where} #{launch_id} {cat}")
    return result


def score_analysis(labels: dict[int, dict], analysis: Analysis,
                   where: str = "") -> tuple[Score, Score]:
    """Score one capture's analysis, and the NCU-rules-only baseline on the same launches.

    The baseline is empty (nothing reported) for forms without ncu's rule results (raw page).
    """
    ours = score(labels, reported_categories(analysis), not_evaluated_categories(analysis),
                 where)
    return ours, score(labels, ncu_baseline_categories(analysis), where=where)
