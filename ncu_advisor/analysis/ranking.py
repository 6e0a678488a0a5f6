"""Ranking findings: within a kernel (severity, then saving) and across the application.

Application-wide, findings are grouped by rule and kernel and weighted by what they save in
the whole run; the order is :func:`rank_groups`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from ..json_text import json_number
from ..rules_engine.findings import SEVERITY_RANK, launch_times, weighted_saving

if TYPE_CHECKING:
    from .result import Analysis


def rank_key(severity: str, confidence: str, saving_ns: float | None) -> tuple:
    """Sort key of one kernel's findings: severity, then the confidence-weighted saving.

    A finding without an estimate comes after those of its severity that have one (not below
    every estimate of any severity).
    """
    weighted = weighted_saving(saving_ns, confidence)
    return (SEVERITY_RANK[severity], weighted is None, -(weighted or 0.0))


def rank_groups(groups: list[dict]) -> list[dict]:
    """Order application-wide finding groups: the largest confidence-weighted saving first.

    A group without an estimate (the rule cannot size the problem) ranks beside the best
    estimated group of the same kernel: it is about a kernel that costs that much. It goes
    before that group when it is more severe (a high atomics finding explains the medium
    latency note whose estimate it would otherwise trail), after it otherwise. A kernel with
    no estimate at all goes after everything estimated, by severity.
    """
    best: dict[str, tuple[float, int]] = {}
    for g in groups:
        w = weighted_saving(g["estimated_saving_ns"], g["confidence"])
        if w is not None and w >= best.get(g["kernel"], (-1.0, 0))[0]:
            best[g["kernel"]] = (w, SEVERITY_RANK[g["severity"]])

    def key(g: dict) -> tuple:
        w = weighted_saving(g["estimated_saving_ns"], g["confidence"])
        severity = SEVERITY_RANK[g["severity"]]
        if w is not None:
            return (0, -w, 0, severity)
        if g["kernel"] in best:
            saving, beside = best[g["kernel"]]
            return (0, -saving, -1 if severity < beside else 1, severity)
        return (1, 0.0, 1, severity)

    return sorted(groups, key=key)


def ranked(analysis: Analysis) -> list[dict]:
    """Findings across the application, grouped by rule and kernel, most important first.

    Each kernel finding counts what it saves in the whole run (its estimate covers all the
    invocations its row stands for); repeated launches of one kernel are grouped into one
    entry. Order: :func:`rank_groups` (the
    saving weighted by confidence; a finding without an estimate beside its kernel's).
    """
    table = analysis.report.launches
    # Plain dicts: a .loc per finding was most of the cost on large reports.
    short_names = dict(zip(table["launch"], table["short_name"], strict=True))
    ncu_ids = dict(zip(table["launch"], table["id"], strict=True))
    invocations = dict(zip(table["launch"], table["invocations"], strict=True))
    times = launch_times(table)
    total = analysis.total_time_ns or float("nan")
    groups: dict[tuple, dict] = {}
    for f in analysis.findings:
        if f.launch is None:
            key = (f.rule, tuple(f.kernel_ids))
            kernel = "application"
            ids = list(f.kernel_ids)
            weight = 1
        else:
            kernel = short_names[f.launch]
            key = (f.rule, kernel)
            ids = [int(ncu_ids[f.launch])] if not pd.isna(ncu_ids[f.launch]) else []
            weight = int(invocations[f.launch])
        g = groups.get(key)
        # A finding's saving already covers every invocation its row stands for (the engine
        # takes a share of duration x invocations).
        saving = f.estimated_saving_ns or 0.0
        if g is None:
            groups[key] = g = {
                "rule": f.rule, "category": f.category, "severity": f.severity,
                "confidence": f.confidence, "title": f.title, "kernel": kernel,
                "kernel_ids": [], "launch_ids": [], "launches": 0, "estimated_saving_ns": 0.0,
                "time_ns": 0.0, "severities": {},
                "has_estimate": False, "advice": f.advice, "demo": f.demo,
                "evidence": f.evidence, "evidence_source": f.evidence_source,
                "origin": f.origin, "note": f.note,
                "source_lines": f.source_lines,
                "source_cause": f.source_cause, "collect_with": f.collect_with,
            }
        g["kernel_ids"].extend(ids)
        members = [f.launch] if f.launch is not None else list(f.launch_ids)
        g["launch_ids"].extend(members)
        # Each member keeps its own severity; the group shows the highest, and how many
        # launches have each (a 5 us launch does not inherit its neighbour's "high").
        count = weight if f.launch is not None else len(members)
        g["severities"][f.severity] = g["severities"].get(f.severity, 0) + count
        g["time_ns"] += sum(times.get(m, 0.0) for m in members if times.get(m) == times.get(m))
        g["launches"] += weight if f.launch is not None else len(ids)
        g["estimated_saving_ns"] += saving
        g["has_estimate"] |= f.estimated_saving_ns is not None
        if SEVERITY_RANK[f.severity] < SEVERITY_RANK[g["severity"]]:
            g["severity"], g["title"], g["evidence"] = f.severity, f.title, f.evidence
    out = []
    for g in groups.values():
        if not g.pop("has_estimate"):
            g["estimated_saving_ns"] = None
        saving = g["estimated_saving_ns"]
        g["app_saving_pct"] = json_number(100.0 * saving / total) if saving is not None else None
        out.append(g)
    ranked_groups = rank_groups(out)
    # Two findings on one kernel are alternative readings of one time: their savings do not
    # add (the actions count each launch's time once). Say so on the later one.
    first: dict[str, int] = {}
    for rank, g in enumerate(ranked_groups, start=1):
        g["same_kernel_as"] = None
        if g["kernel"] == "application" or not g["estimated_saving_ns"]:
            continue
        g["same_kernel_as"] = first.get(g["kernel"])
        first.setdefault(g["kernel"], rank)
    return ranked_groups
