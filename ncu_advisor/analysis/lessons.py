"""A demo's lesson told from its shipped capture, with no GPU (``ncu-advise demo NAME --offline``).

Every teaching pair was captured on an H200 (``sample_reports/demos/<name>.{raw,details}.csv``).
Each variant is analyzed as a program of its own, as the rule cases do
(:func:`.cases.capture_findings`), so the lesson shows what a student would see profiling the
slow kernel, then the fixed one: the time of each, and the findings the fix removes, keeps and
brings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import DemoError
from ..rules_engine.findings import Finding
from .cases import capture_findings, capture_paths
from .ranking import rank_key


@dataclass
class Side:
    """One variant of the pair as captured: its kernels, GPU time and findings."""

    role: str
    label: str
    kernels: list[str]
    duration_ns: float | None
    findings: list[dict] = field(default_factory=list)


@dataclass
class OfflineLesson:
    """A pair's lesson from its capture: both sides, and how their findings differ."""

    name: str
    title: str
    what: str
    why: str
    fix: str
    bad: Side
    good: Side
    speedup: float | None
    resolved: list[dict]  # on the bad variant only: what the fix removes
    kept: list[dict]  # on both
    new: list[dict]  # on the good variant only
    sources: list[str]

    def to_dict(self) -> dict:
        """A plain dictionary (``demo NAME --offline -f json``)."""
        return asdict(self)


def _entry(f: Finding, kernels: dict[int, str]) -> dict:
    return {"rule": f.rule, "severity": f.severity, "title": f.title,
            "kernel": kernels.get(f.launch, "application") if f.launch is not None
            else "application", "estimated_saving_ns": f.estimated_saving_ns,
            "advice": f.advice}


def offline_lesson(name: str, root: Path | None = None) -> OfflineLesson:
    """Walk one demo's lesson from its shipped capture.

    Args:
        name: the demo (``ncu-advise demo --list``).
        root: where ``sample_reports/`` lies (default: the checkout this package runs from).

    Raises:
        DemoError: unknown demo, or its capture is not in this install (a wheel ships no
            ``sample_reports/``).

    """
    from ..demos import get_demo
    from ..readers import read_report
    from ..rules_engine.loader import load_rules

    demo = get_demo(name)
    paths = capture_paths(name, root)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise DemoError(f"demo {name}: its capture is not in this install ({missing[0]} is "
                        "missing); the project's checkout ships sample_reports/demos")
    report = read_report(paths)
    launches = report.launches
    rules = load_rules()
    sides = {}
    for role in ("bad", "good"):
        variant = getattr(demo, role)
        rows = launches[launches["short_name"].isin(variant.kernels)]
        found = sorted(capture_findings(name, role, rules, root),
                       key=lambda f: rank_key(f.severity, f.confidence, f.estimated_saving_ns))
        # capture_findings analyzes the variant's launches alone, numbered 0..n-1 in order.
        short = dict(enumerate(rows["short_name"].tolist()))
        time = float((rows["duration_ns"] * rows["invocations"]).sum()) if len(rows) else None
        sides[role] = Side(role, variant.label, list(variant.kernels), time,
                           [_entry(f, short) for f in found])
    bad_rules = {f["rule"] for f in sides["bad"].findings}
    good_rules = {f["rule"] for f in sides["good"].findings}
    bad, good = sides["bad"], sides["good"]
    speedup = (bad.duration_ns / good.duration_ns
               if bad.duration_ns and good.duration_ns else None)
    return OfflineLesson(
        name=demo.name, title=demo.title, what=demo.lesson.what, why=demo.lesson.why,
        fix=demo.lesson.fix, bad=bad, good=good, speedup=speedup,
        resolved=[f for f in bad.findings if f["rule"] not in good_rules],
        kept=[f for f in good.findings if f["rule"] in bad_rules],
        new=[f for f in good.findings if f["rule"] not in bad_rules],
        sources=[str(p) for p in paths])
