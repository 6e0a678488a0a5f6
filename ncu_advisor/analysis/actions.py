"""Program-level actions: the medium/high findings grouped by the change a user makes.

One action is one change (compile the eager ops, turn on TF32, fix one kernel's loads) with the
launches it touches, the GPU time at stake and the saving expected, counted once across the
whole list: a launch two actions would speed up gives each action only what the ones ranked
above it left. The classes of change are data (``data/actions.toml``: which rules one change
resolves, and its title); what to change is the advice of the findings it gathers. A finding
no class claims becomes an action of its own (one per rule and kernel for user code, one per rule
across a library's kernels).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import pandas as pd

from ..json_text import json_number
from ..rules_engine.findings import SEVERITY_RANK, Finding, weighted_saving

if TYPE_CHECKING:
    from .result import Analysis

COUNTED = ("high", "medium")  # only findings at these severities make an action
# Changes that remove launches (fusing them, launching the step at once) remove the host's
# time for them too; a change that only makes kernels faster leaves the host's pace alone.
REMOVES_LAUNCHES = {"fusion", "launch-overhead"}
# Where a kernel sits (memory-, latency-bound, a hot spot) is context for the changes, not one.
NOT_A_CHANGE = {"roofline"}
_CONFIDENCE_RANK = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class ActionClass:
    """One kind of change from ``data/actions.toml``."""

    id: str
    category: str
    title: str
    rules: frozenset[str]
    origin: str | None = None  # "library", "user" or None (either)

    def claims(self, f: Finding, library: bool) -> bool:
        """Whether a finding (on a library kernel or not) is this change's to resolve."""
        if f.rule not in self.rules:
            return False
        return self.origin is None or (self.origin == "library") == library


@lru_cache(maxsize=1)
def action_classes() -> tuple[ActionClass, ...]:
    """The built-in classes of change, in file order."""
    text = resources.files("ncu_advisor").joinpath("data/actions.toml").read_text()
    return tuple(ActionClass(a["id"], a["category"], a["title"], frozenset(a["rules"]),
                             a.get("origin"))
                 for a in tomllib.loads(text)["action"])


@dataclass
class Action:
    """One change and what it is worth."""

    id: str
    category: str
    title: str
    change: str
    severity: str
    confidence: str
    launches: list[int] = field(default_factory=list)  # internal launch indices
    kernel_ids: list[int] = field(default_factory=list)  # ncu's launch IDs
    findings: list[str] = field(default_factory=list)  # "rule" or "rule: kernel"
    time_at_stake_ns: float = 0.0
    estimated_saving_ns: float | None = None
    _claims: dict[int, float] = field(default_factory=dict, repr=False)

    def to_dict(self, total_ns: float) -> dict:
        """The JSON form (``actions`` in the contract)."""
        share = (100.0 * self.time_at_stake_ns / total_ns) if total_ns else None
        return {"action": self.id, "category": self.category, "title": self.title,
                "change": self.change, "severity": self.severity,
                "confidence": self.confidence, "launches": self.kernel_ids,
                "launch_count": len(self.launches),
                "time_at_stake_ns": json_number(self.time_at_stake_ns),
                "time_at_stake_pct": json_number(share),
                "estimated_saving_ns": json_number(self.estimated_saving_ns),
                "findings": self.findings}


def _per_launch_saving(f: Finding, durations: dict[int, float]) -> dict[int, float]:
    """What a finding saves on each launch it covers; empty when it has no estimate.

    An application finding's saving is spread over its launches by their time.
    """
    saving = f.estimated_saving_ns
    if saving is None or pd.isna(saving) or saving <= 0:
        return {}
    if f.launch is not None:
        return {f.launch: min(float(saving), durations.get(f.launch, float(saving)))}
    total = sum(durations.get(n, 0.0) for n in f.launch_ids)
    if not total:
        return {}
    return {n: float(saving) * durations.get(n, 0.0) / total for n in f.launch_ids}


def build_actions(analysis: Analysis) -> list[Action]:
    """The ranked action list of one analysis (see the module doc)."""
    table = analysis.report.launches
    # What each launch costs the step: its GPU time and the GPU's wait on the host before it
    # (which launching the step at once removes).
    waits = analysis.host_waits
    durations = dict(zip(table["launch"].tolist(),
                         (table["duration_ns"].fillna(0.0) * table["invocations"]).tolist(),
                         strict=True))
    budgets = {n: d + waits.get(n, 0.0) for n, d in durations.items()}
    ncu_ids = dict(zip(table["launch"].tolist(), table["id"].tolist(), strict=True))
    names = dict(zip(table["launch"].tolist(), table["short_name"].tolist(), strict=True))
    origins = analysis.origins
    library = (origins["origin_library"].to_dict() if origins is not None else {})
    labels = (origins["origin_label"].to_dict() if origins is not None else {})
    classes = action_classes()
    actions: dict[str, Action] = {}
    for f in analysis.findings:
        if f.severity not in COUNTED or f.category in NOT_A_CHANGE:
            continue
        covered = [f.launch] if f.launch is not None else list(f.launch_ids)
        on_library = bool(covered) and all(library.get(n, False) for n in covered)
        kind = next((c for c in classes if c.claims(f, on_library)), None)
        if kind is not None:
            key, title, category = kind.id, kind.title, kind.category
        elif on_library:  # one caller-side change for every kernel of the library
            label = labels.get(covered[0], "library")
            key, title, category = f"{f.rule}@{label}", f"{label}: {f.title}", f.category
        else:
            kernel = names.get(covered[0], "") if f.launch is not None else "application"
            key = f"{f.rule}@{kernel}"
            title = f.title if f.launch is None else f"{kernel}: {f.title}"
            category = f.category
        action = actions.get(key)
        if action is None:  # what to change: the advice of its first finding (the rule's
            # fix, or the caller advice the library policy gave it)
            action = actions[key] = Action(key, category, title, f.advice, f.severity,
                                           f.confidence)
        elif SEVERITY_RANK[f.severity] < SEVERITY_RANK[action.severity]:
            action.severity = f.severity
        if _CONFIDENCE_RANK.get(f.confidence, 2) < _CONFIDENCE_RANK.get(action.confidence, 2):
            action.confidence = f.confidence
        for n in covered:
            if n not in action.launches:
                action.launches.append(n)
        for n, s in _per_launch_saving(f, budgets).items():
            action._claims[n] = max(action._claims.get(n, 0.0), s)
        where = "" if f.launch is None else f": {names.get(f.launch, '')}"
        if f.rule + where not in action.findings:
            action.findings.append(f.rule + where)
    return _count_once(list(actions.values()), durations, budgets, ncu_ids, waits)


def _count_once(actions: list[Action], durations: dict[int, float],
                budgets: dict[int, float], ncu_ids: dict[int, object],
                waits: Mapping[int, float]) -> list[Action]:
    """Give each launch's time to the actions in rank order, then rank by what they keep.

    A launch's budget is its GPU time and the wait before it; the time at stake is GPU time.
    Each action takes its share of the budget from what the actions above it left on that
    launch, so savings on one launch multiply (40% after 50% is 20% more), never add past it.
    In the host queue model a kernel that finishes sooner in a step whose GPU waits on the
    host only waits longer: a change that makes kernels faster keeps what is left of its
    saving after the waits the changes ranked above it have not removed (a step that repeats
    has every wait after some of its kernels, so their sum is the bound, whatever the order,
    which a census-weighted profile does not keep).
    """
    waits_left = float(sum(waits.values()))
    waits_gone: set[int] = set()  # launches whose wait a launch-removing change took

    def raw(a: Action) -> float:
        return weighted_saving(sum(a._claims.values()), a.confidence) or 0.0

    remaining = dict(budgets)
    for a in sorted(actions, key=lambda a: (-raw(a), SEVERITY_RANK[a.severity])):
        a.launches.sort()
        a.kernel_ids = [int(ncu_ids[n]) for n in a.launches if not pd.isna(ncu_ids.get(n))]
        a.time_at_stake_ns = float(sum(durations.get(n, 0.0) for n in a.launches))
        if a._claims:
            kept = 0.0
            for n, s in a._claims.items():
                # Changes to one launch compose: each saves its share of what the changes
                # ranked above it left (a grid fix halving a kernel leaves half the time for
                # an FP64 -> FP32 change to cut), never the same time twice.
                budget = budgets.get(n, 0.0)
                share = min(1.0, s / budget) if budget > 0 else 0.0
                take = share * remaining.get(n, 0.0)
                remaining[n] = remaining.get(n, 0.0) - take
                kept += take
            if a.category in REMOVES_LAUNCHES:  # the waits before its launches go with them
                gone = set(a.launches) - waits_gone
                waits_gone |= gone
                waits_left = max(0.0, waits_left - sum(waits.get(n, 0.0) for n in gone))
            else:
                kept = max(0.0, kept - waits_left)
            a.estimated_saving_ns = kept

    def key(a: Action) -> tuple:
        w = weighted_saving(a.estimated_saving_ns, a.confidence)
        return (w is None, -(w or 0.0), SEVERITY_RANK[a.severity], -a.time_at_stake_ns)

    return sorted(actions, key=key)
