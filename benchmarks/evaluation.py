"""Score advice against blind expert labels (../shared/EVALUATION.md's protocol).

One label format for every set (``tests/data/*_labels.toml``)::

    [[program]]
    name = "cuda_reduction"          # the capture's stem in its folder
    split = "dev"                    # or "sealed"
    first_action = ["divergence"]    # categories of the labeller's first action
    first_action_why = "..."

    [[launch]]
    capture = "cuda_reduction"
    id = 0                           # ncu's launch ID
    what = "..."                     # what the kernel is, whose code
    origin = "user"                  # user | library | compiler | framework
    real = [{category = "divergence", equivalent = ["math-rewrite"], group = "...", why = "..."}]
    noise = ["coalescing"]           # categories that would be false alarms
    debatable = ["occupancy"]        # a reasonable engineer might raise them

Scoring, of medium/high findings per (launch, category): a reported category that matches a
real problem of its launch (its category or an equivalent) is a true positive; one in the
launch's ``debatable`` list counts against strict precision only; any other is a false
positive. Slot recall counts real problems found (a category not evaluated by the form counts
as a miss, and is tallied apart); group recall counts problem groups found on at least one of
their launches. Nsight Compute's own rule results are scored the same way as the baseline.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ncu_advisor.analysis.result import Analysis
from ncu_advisor.derive.ncu_evidence import ncu_rule_categories

COUNTED = ("high", "medium")
# Where every launch is: not a defect category of its own.
UNCOUNTED = {"roofline", ""}


@dataclass(frozen=True)
class Problem:
    """One real problem on one launch."""

    category: str
    equivalent: frozenset[str]
    group: str
    why: str

    @property
    def accepted(self) -> frozenset[str]:
        """The categories that count as finding it."""
        return self.equivalent | {self.category}


@dataclass
class LaunchLabel:
    """The labeller's verdict on one launch."""

    id: int
    what: str = ""
    origin: str = ""
    real: list[Problem] = field(default_factory=list)
    noise: set[str] = field(default_factory=set)
    debatable: set[str] = field(default_factory=set)


@dataclass
class ProgramLabel:
    """One labelled capture: its split, first action and launches."""

    name: str
    split: str = "dev"
    first_action: set[str] = field(default_factory=set)
    first_action_why: str = ""
    launches: dict[int, LaunchLabel] = field(default_factory=dict)


DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
# The corpus' label files, one per labelling batch, each frozen on its own (tests/test_corpus.py).
CORPUS_LABEL_FILES = (DATA / "corpus_labels.toml", DATA / "corpus2_labels.toml",
                      DATA / "corpus3_labels.toml", DATA / "corpus4_labels.toml",
                      DATA / "corpus5_labels.toml",
                      DATA / "corpus6_labels.toml", DATA / "corpus7_labels.toml",
                      DATA / "corpus8_labels.toml", DATA / "corpus9_labels.toml",
                      DATA / "corpus10_labels.toml", DATA / "corpus11_labels.toml",
                      DATA / "corpus12_labels.toml", DATA / "corpus13_labels.toml")
# Splits changed after a sealed score (a sealed program is scored once, then joins dev).
CORPUS_SPLITS = DATA / "corpus_splits.toml"


def load_corpus_labels() -> dict[str, ProgramLabel]:
    """Every labelled corpus capture, with the split it has now."""
    programs: dict[str, ProgramLabel] = {}
    for path in CORPUS_LABEL_FILES:
        batch = load_labels(path)
        twice = programs.keys() & batch.keys()
        if twice:
            raise ValueError(f"{path.name}: labelled twice: {sorted(twice)}")
        programs.update(batch)
    moves = tomllib.loads(CORPUS_SPLITS.read_text(encoding="utf-8")).get("moved", [])
    for move in moves:
        programs[move["name"]].split = move["to"]
    return programs


# Label files written before the `layout` id (the foreign and held-out sets, 2026-12-01) call a
# transposing copy's strided loads coalescing; the tool reports them as layout since
# 2026-12-03 (the caller's change is the layout upstream). Finding either is finding it.
BEFORE_LAYOUT: dict[str, frozenset[str]] = {"coalescing": frozenset({"layout"})}


def load_labels(path: str | Path,
                later_ids: dict[str, frozenset[str]] | None = None) -> dict[str, ProgramLabel]:
    """Read a labels file: capture name -> its labels.

    ``later_ids`` maps a category to ids introduced after the file was written that report
    the same problem (``BEFORE_LAYOUT``); they are accepted as equivalents.
    """
    later_ids = later_ids or {}
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    programs = {p["name"]: ProgramLabel(p["name"], p.get("split", "dev"),
                                        set(p.get("first_action", [])),
                                        p.get("first_action_why", ""))
                for p in data.get("program", [])}
    for entry in data.get("launch", []):
        program = programs.setdefault(entry["capture"], ProgramLabel(entry["capture"]))
        launch_id = int(entry["id"])
        problems = [Problem(r["category"], frozenset(r.get("equivalent", []))
                            | later_ids.get(r["category"], frozenset()),
                            r.get("group") or f"{program.name}#{launch_id}:{r['category']}",
                            r.get("why", ""))
                    for r in entry.get("real", [])]
        program.launches[launch_id] = LaunchLabel(
            launch_id, entry.get("what", ""), entry.get("origin", ""), problems,
            set(entry.get("noise", [])), set(entry.get("debatable", [])))
    return programs


@dataclass
class Tally:
    """Counts of one scoring run, with every error listed."""

    true_positives: int = 0        # reported categories explained by a real problem
    false_positives: int = 0       # reported categories neither real nor debatable
    debatable: int = 0             # reported categories the labeller called debatable
    slots: int = 0                 # real problems (launch x problem)
    slots_found: int = 0
    not_evaluated: int = 0         # real problems whose category the form could not evaluate
    groups: set[str] = field(default_factory=set)
    groups_found: set[str] = field(default_factory=set)
    programs: int = 0
    first_action_agree: int = 0
    false_positive_cases: list[str] = field(default_factory=list)
    debatable_cases: list[str] = field(default_factory=list)
    missed_cases: list[str] = field(default_factory=list)
    first_action_cases: list[str] = field(default_factory=list)

    @property
    def strict_precision(self) -> float:
        """TP / everything reported at medium/high (debatable counts against)."""
        n = self.true_positives + self.false_positives + self.debatable
        return self.true_positives / n if n else 1.0

    @property
    def lenient_precision(self) -> float:
        """TP / (TP + FP): debatable findings left out."""
        n = self.true_positives + self.false_positives
        return self.true_positives / n if n else 1.0

    @property
    def slot_recall(self) -> float:
        """Real problems found / real problems."""
        return self.slots_found / self.slots if self.slots else 1.0

    @property
    def group_recall(self) -> float:
        """Problem groups found at least once / problem groups."""
        return len(self.groups_found) / len(self.groups) if self.groups else 1.0

    @property
    def first_action_rate(self) -> float:
        """Share of programs whose first-ranked advice is the labeller's first action."""
        return self.first_action_agree / self.programs if self.programs else 1.0

    def add(self, other: Tally) -> None:
        """Accumulate another tally."""
        for name in ("true_positives", "false_positives", "debatable", "slots", "slots_found",
                     "not_evaluated", "programs", "first_action_agree"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.groups |= other.groups
        self.groups_found |= other.groups_found
        for name in ("false_positive_cases", "debatable_cases", "missed_cases",
                     "first_action_cases"):
            getattr(self, name).extend(getattr(other, name))

    def summary(self) -> dict:
        """The figures as plain numbers (for JSON and tests)."""
        return {"tp": self.true_positives, "fp": self.false_positives,
                "debatable": self.debatable, "slots": self.slots, "found": self.slots_found,
                "not_evaluated": self.not_evaluated, "groups": len(self.groups),
                "groups_found": len(self.groups_found), "programs": self.programs,
                "first_action_agree": self.first_action_agree,
                "strict_precision": self.strict_precision,
                "lenient_precision": self.lenient_precision,
                "slot_recall": self.slot_recall, "group_recall": self.group_recall,
                "first_action_rate": self.first_action_rate}


def _ncu_ids(analysis: Analysis) -> pd.Series:
    return analysis.report.launches.set_index("launch")["id"]


def reported_categories(analysis: Analysis,
                        severities: tuple[str, ...] = COUNTED) -> dict[int, dict[str, str]]:
    """Finding categories (medium/high unless told) per ncu launch ID, each with its rule.

    A finding over several launches (a chain) counts on each of them.
    """
    ids = _ncu_ids(analysis)
    out: dict[int, dict[str, str]] = {}
    for f in analysis.findings:
        if f.severity not in severities or f.category in UNCOUNTED:
            continue
        for launch in [f.launch] if f.launch is not None else f.launch_ids:
            out.setdefault(int(ids[launch]), {}).setdefault(f.category, f.rule)
    return out


def not_evaluated_categories(analysis: Analysis) -> dict[int, set[str]]:
    """Categories some rule could not evaluate, per ncu launch ID (application rules: all)."""
    ids = _ncu_ids(analysis)
    out: dict[int, set[str]] = {}
    for n in analysis.not_evaluated:
        for launch in [n.launch] if n.launch is not None else list(ids.index):
            out.setdefault(int(ids[launch]), set()).add(n.category)
    return out


def ncu_rule_reported(analysis: Analysis, min_speedup: float = 5.0) -> dict[int, dict[str, str]]:
    """Nsight Compute's own results as the baseline: each OPT message estimating at least
    ``min_speedup`` %, mapped to its checklist category."""
    opt = ncu_rule_categories(analysis.report.ncu_rules)
    ids = _ncu_ids(analysis)
    kept = opt[(pd.to_numeric(opt["speedup"], errors="coerce") >= min_speedup)
               & ~opt["category"].isin(list(UNCOUNTED))]
    out: dict[int, dict[str, str]] = {}
    for launch, category, rule in zip(kept["launch"], kept["category"], kept["rule"],
                                      strict=True):
        out.setdefault(int(ids[launch]), {}).setdefault(category, f"ncu:{rule}")
    return out


def first_ranked(analysis: Analysis) -> str | None:
    """The category of the first-ranked medium/high advice (an action once there are any)."""
    actions = getattr(analysis, "actions", None)
    if actions:
        return actions[0].category
    for entry in analysis.ranked():
        if entry["severity"] in COUNTED:
            return entry["category"]
    return None


def score(label: ProgramLabel, reported: dict[int, dict[str, str]],
          skipped: dict[int, set[str]] | None = None, where: str = "",
          first: str | None = None) -> Tally:
    """Score one capture's reported categories against its labels."""
    t = Tally(programs=1 if label.first_action else 0)
    skipped = skipped or {}
    for launch_id, lab in label.launches.items():
        found = reported.get(launch_id, {})
        accepted = set().union(*(p.accepted for p in lab.real)) if lab.real else set()
        for category, rule in sorted(found.items()):
            if category in accepted:
                t.true_positives += 1
            elif category in lab.debatable:
                t.debatable += 1
                t.debatable_cases.append(f"{where} #{launch_id} {category} ({rule})")
            else:
                t.false_positives += 1
                t.false_positive_cases.append(
                    f"{where} #{launch_id} {category} ({rule}): {lab.what}")
        for p in lab.real:
            t.slots += 1
            t.groups.add(p.group)
            if p.accepted & set(found):
                t.slots_found += 1
                t.groups_found.add(p.group)
            else:
                ne = bool(p.accepted & skipped.get(launch_id, set()))
                t.not_evaluated += ne
                t.missed_cases.append(f"{where} #{launch_id} {p.category}"
                                      f"{' (not evaluated)' if ne else ''}: {p.why}")
    if label.first_action:
        agree = first in label.first_action
        t.first_action_agree += agree
        t.first_action_cases.append(
            f"{where}: {'agrees' if agree else 'differs'}: tool {first or 'nothing'}, "
            f"labeller {'/'.join(sorted(label.first_action))}")
    return t


def score_analysis(label: ProgramLabel, analysis: Analysis, where: str = "") -> tuple[Tally, Tally]:
    """Score one capture's analysis, and Nsight Compute's rules on the same launches."""
    ours = score(label, reported_categories(analysis), not_evaluated_categories(analysis),
                 where, first_ranked(analysis))
    theirs = score(label, ncu_rule_reported(analysis), where=where)
    theirs.programs = theirs.first_action_agree = 0
    theirs.first_action_cases = []
    return ours, theirs


def estimated_saving_ns(analysis: Analysis, category: str,
                        launch_ids: list[int] | None = None) -> float:
    """What the findings of one category estimate a fix would save, each launch counted once
    (the largest estimate among its findings of that category), over the given ncu IDs."""
    ids = _ncu_ids(analysis)
    best: dict[int, float] = {}
    for f in analysis.findings:
        if f.category != category or f.estimated_saving_ns is None:
            continue
        launches = [f.launch] if f.launch is not None else list(f.launch_ids)
        share = f.estimated_saving_ns / max(len(launches), 1)
        for launch in launches:
            ncu_id = int(ids[launch])
            if launch_ids is None or ncu_id in launch_ids:
                best[ncu_id] = max(best.get(ncu_id, 0.0), share)
    return sum(best.values())
