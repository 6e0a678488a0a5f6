"""The result of one analysis: every table and finding computed from one Report.

``Analysis`` holds what :func:`~.pipeline.analyze` computed; its JSON form is
:mod:`.contract`'s, its application-wide ranking :mod:`.ranking`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import pandas as pd

from ..derive.limiter import Limiter
from ..derive.occupancy_report import LaunchEntries
from ..derive.roofline import Rooflines
from ..report import Report
from ..rules_engine.engine import Finding, NotEvaluatedList
from ..rules_engine.schema import Rule
from . import contract
from .actions import Action, build_actions
from .ranking import rank_key, ranked
from .regions import Region
from .validity import validity_checks


@dataclass
class Analysis:
    """Everything computed from one Report."""

    report: Report
    quantities: pd.DataFrame
    rooflines: Rooflines  # launch -> Roofline, computed when read; .bound kept for all
    occupancy: Mapping[int, dict]  # built per launch on access (derive/occupancy_report.py)
    findings: list[Finding]
    not_evaluated: NotEvaluatedList  # reads as a list of NotEvaluated
    rules: list[Rule]
    command: list[str] | None = None
    extra_session: dict = field(default_factory=dict)
    launch_shapes: Mapping[int, dict] = field(default_factory=dict)
    origins: pd.DataFrame | None = None  # per launch: origin, origin_label, origin_library, role
    regions: list[Region] = field(default_factory=list)
    limiters: Mapping[int, Limiter] = field(default_factory=dict)  # launch -> its one limiter
    # launch -> the GPU's modelled wait on the host before it (derive/host_timeline.py)
    host_waits: Mapping[int, float] = field(default_factory=dict)
    _actions: list[Action] | None = field(default=None, repr=False)

    def __repr__(self) -> str:  # the dataclass repr printed every table whole
        launches = len(self.report.launches)
        return (f"Analysis({launches} launch(es), {len(self.findings)} finding(s), "
                f"{len(self.not_evaluated)} not evaluated, sources={self.report.sources!r})")

    @property
    def validity(self) -> list[dict]:
        """What limits trust in the numbers (``validity.py``); reads ``extra_session`` too."""
        return validity_checks(self.report, self.rules, self.not_evaluated.distinct(),
                               self.extra_session)

    @property
    def total_time_ns(self) -> float:
        """Total GPU time of all launches (invocations counted)."""
        return self.report.total_duration_ns

    def kernel_findings(self, launch: int) -> list[Finding]:
        """Findings about one launch, most severe first."""
        return sorted((f for f in self.findings if f.launch == launch),
                      key=lambda f: rank_key(f.severity, f.confidence, f.estimated_saving_ns))

    @property
    def actions(self) -> list[Action]:
        """The changes to make, ranked, their savings counted once (see actions.py)."""
        if self._actions is None:
            self._actions = build_actions(self)
        return self._actions

    def ranked(self) -> list[dict]:
        """Findings across the application, grouped, most important first (see ranking)."""
        return ranked(self)

    FRAME_COLUMNS = ("launch", "id", "kernel", "rule", "category", "severity", "confidence",
                     "title", "estimated_speedup_pct", "estimated_saving_ns", "origin",
                     "evidence_source", "advice", "demo")

    def findings_frame(self) -> pd.DataFrame:
        """Every finding as one row of a DataFrame, most severe first (evidence left out).

        Columns: :attr:`FRAME_COLUMNS` (``launch`` and ``id`` are empty for a finding about
        the whole application; ``kernel`` is the launch's short name or ``application``).
        """
        launches = self.report.launches.set_index("launch")
        names = launches["short_name"].to_dict()
        ids = launches["id"].to_dict()
        rows = []
        for f in sorted(self.findings, key=lambda f: rank_key(f.severity, f.confidence,
                                                             f.estimated_saving_ns)):
            row = {name: getattr(f, name, None) for name in self.FRAME_COLUMNS
                   if name not in ("launch", "id", "kernel")}
            row.update(launch=f.launch, id=ids.get(f.launch),
                       kernel=names.get(f.launch, "application"))
            rows.append(row)
        frame = pd.DataFrame(rows, columns=list(self.FRAME_COLUMNS))
        return frame.astype({"launch": "Int64", "id": "Int64"})

    def actions_frame(self) -> pd.DataFrame:
        """The actions (the changes to make, ranked) as a DataFrame, one row each."""
        total = self.total_time_ns
        return pd.DataFrame([a.to_dict(total) for a in self.actions],
                            columns=["action", "category", "title", "severity", "confidence",
                                     "launch_count", "time_at_stake_pct",
                                     "estimated_saving_ns", "change", "launches", "findings"])

    def origins_by_launch(self) -> Mapping[int, dict]:
        """Each kernel's origin fields for the JSON: ``origin``, ``origin_label``, ``role``, ``op``.

        ``op`` is the operation a framework kernel performs, else its short name.
        """
        if self.origins is None:
            return {}
        table = self.origins
        return LaunchEntries(table.index, {
            "origin": table["origin"].tolist(), "origin_label": table["origin_label"].tolist(),
            "role": [None if pd.isna(role) else role for role in table["role"].tolist()],
            "op": (table["op"].tolist() if "op" in table.columns
                   else [None] * len(table))})

    def bounds(self) -> dict[str, int]:
        """How many launches are memory-, compute-, latency-bound or unknown."""
        counts = {"memory": 0, "compute": 0, "latency": 0, "unknown": 0}
        for bound in self.rooflines.bound.values():
            counts[bound or "unknown"] += 1
        return counts

    def to_dict(self, include_metrics: bool = False,
                kernel_fields: tuple[str, ...] | None = None) -> dict:
        """Return the JSON contract, schema_version 1 (:func:`.contract.to_dict`)."""
        return contract.to_dict(self, include_metrics, kernel_fields)

    def write_json(self, fh, include_metrics: bool = False) -> None:
        """Write the JSON contract to a binary file, kernel by kernel (see contract)."""
        contract.write_json(self, fh, include_metrics)

    def iter_kernels(self, include_metrics: bool = False,
                     fields: tuple[str, ...] | None = None, clean: bool = True,
                     launches: Collection[int] | None = None):
        """Yield the JSON entry of each launch in order (:func:`.contract.iter_kernels`)."""
        return contract.iter_kernels(self, include_metrics, fields, clean, launches)
