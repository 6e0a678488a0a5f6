"""Test cases of a rule, kept beside it: ``RULE.cases.toml`` next to ``RULE.toml``.

Each case is a small table of quantity values (anything not given is unknown) and the
outcome the rule must give on a launch with those values::

    [[case]]
    name = "memory-bound, L2 misses"
    expect = "fires"            # fires | silent | not-evaluated
    severity = "medium"         # optional, with fires
    confidence = "high"         # optional, with fires
    values = { mem_pct = 85, sm_pct = 20, l2_hit_pct = 12 }

Derived quantities (``memory_bound``, ``arith_intensity_dram`` ...) are computed from the
values given, as on a real report. ``ncu-advise rules --test DIR`` runs them, and so does the
project's test suite for the examples it ships.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..derive.quantities import add_derived, quantity_names
from .engine import evaluate
from .findings import CONFIDENCE_STEPS, Finding
from .loader import CASES_SUFFIX, check_rules
from .schema import SEVERITIES, Rule, did_you_mean

OUTCOMES = ("fires", "silent", "not-evaluated")


@dataclass
class CaseResult:
    """One case run: where it is, and what went wrong (None when it passed)."""

    path: Path
    rule: str
    name: str
    problem: str | None = None

    def __str__(self) -> str:
        status = "ok" if self.problem is None else f"FAILED: {self.problem}"
        return f"{self.path.name} [{self.name}]: {status}"


def outcome(rule: Rule, values: dict[str, float]) -> tuple[str, str | None]:
    """What ``rule`` says on one launch with these quantity values: outcome and severity."""
    got, finding = judge(rule, values)
    return got, finding.severity if finding is not None else None


def judge(rule: Rule, values: dict[str, float]) -> tuple[str, Finding | None]:
    """What ``rule`` says on one launch with these quantity values, and its finding."""
    frame = add_derived(pd.DataFrame([{n: float(v) for n, v in values.items()}], index=[0]))
    duration = float(values.get("duration_ns", np.nan))
    launches = pd.DataFrame({"launch": [0], "duration_ns": [duration], "invocations": [1],
                             "short_name": ["case"], "id": [0]})
    findings, skipped = evaluate([rule], frame, launches)
    if findings:
        return "fires", findings[0]
    return ("not-evaluated" if skipped else "silent"), None


def _check_case(case: dict) -> list[str]:
    problems = []
    known = set(quantity_names())
    for name in case.get("values", {}):
        if name not in known:
            problems.append(f"unknown quantity {name!r}{did_you_mean(name, known)}")
    if case.get("expect") not in OUTCOMES:
        problems.append(f"expect = {case.get('expect')!r}: use one of {', '.join(OUTCOMES)}")
    if "severity" in case and case["severity"] not in SEVERITIES:
        problems.append(f"severity = {case['severity']!r}: use one of {', '.join(SEVERITIES)}")
    if "confidence" in case and case["confidence"] not in CONFIDENCE_STEPS:
        problems.append(f"confidence = {case['confidence']!r}: use one of "
                        f"{', '.join(CONFIDENCE_STEPS)}")
    return problems


def run_case_file(path: Path, rule: Rule) -> list[CaseResult]:
    """Run every case of one cases file against its rule."""
    try:
        cases = tomllib.loads(path.read_text(encoding="utf-8")).get("case", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [CaseResult(path, rule.id, "(file)", f"cannot read ({exc})")]
    if not cases:
        return [CaseResult(path, rule.id, "(file)", "no [[case]] tables")]
    results = []
    for i, case in enumerate(cases, 1):
        name = str(case.get("name", f"case {i}"))
        problems = _check_case(case)
        if problems:
            results.append(CaseResult(path, rule.id, name, "; ".join(problems)))
            continue
        got, finding = judge(rule, case.get("values", {}))
        problem = None
        if got != case["expect"]:
            problem = f"expected {case['expect']}, got {got}"
        else:
            for key in ("severity", "confidence"):
                value = getattr(finding, key, None)
                if key in case and value != case[key]:
                    problem = f"expected {key} {case[key]}, got {value}"
                    break
        results.append(CaseResult(path, rule.id, name, problem))
    return results


def run_cases(folder: Path) -> tuple[list[CaseResult], list[str]]:
    """Check a rule folder and run the cases beside its rules.

    Returns the case results and the folder's rule problems (when there are problems, no
    case runs). A cases file without its rule is a problem too.
    """
    rules, problems = check_rules([folder])
    if problems:
        return [], problems
    by_id = {r.id: r for r in rules}
    results: list[CaseResult] = []
    for path in sorted(folder.glob(f"*{CASES_SUFFIX}")):
        rule_id = path.name.removesuffix(CASES_SUFFIX)
        if rule_id not in by_id:
            problems.append(f"{path}: no rule {rule_id!r} beside it ({rule_id}.toml)")
            continue
        results += run_case_file(path, by_id[rule_id])
    return results, problems
