"""View-model of the report's context: validity, NVTX regions, source lines, finding groups.

Kept apart from ``html.py`` so the page's core stays as it is; ``build_page`` calls these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GROUP_BY = ("kernel", "nvtx", "origin")
OUTSIDE = "(outside any NVTX range)"


@dataclass
class ValidityRow:
    """One validity lint entry."""

    check: str
    severity: str
    message: str


@dataclass
class RegionRow:
    """One NVTX region, indented by depth."""

    name: str
    leaf: str
    depth: int
    duration_ns: float | None
    self_duration_ns: float | None
    time_share: float | None
    launches: int
    kernels: int
    bounds: list[tuple[str, int]]
    top_findings: list[Mapping[str, Any]]


@dataclass
class SourceLineRow:
    """A source line behind a finding."""

    file: str
    short_file: str
    line: int
    share_pct: float | None
    sass: str
    stall: str | None = None


@dataclass
class FindingGroup:
    """Findings of the application list that share a kernel, an NVTX region or an origin."""

    name: str
    saving_ns: float
    rows: list = field(default_factory=list)


def validity_rows(result: Mapping[str, Any]) -> list[ValidityRow]:
    """The validity entries of a result, as they come (warnings first)."""
    return [ValidityRow(str(e.get("check", "")), str(e.get("severity", "info")),
                        str(e.get("message", "")))
            for e in result.get("validity") or [] if isinstance(e, Mapping)]


def region_rows(result: Mapping[str, Any]) -> list[RegionRow]:
    """The NVTX regions of a result, outer before inner."""
    rows = []
    for r in result.get("regions") or []:
        name = str(r.get("name", ""))
        depth = int(r.get("depth") or 0)
        rows.append(RegionRow(
            name=name, leaf=name.rsplit("/", 1)[-1] if depth else name, depth=depth,
            duration_ns=r.get("duration_ns"), self_duration_ns=r.get("self_duration_ns"),
            time_share=r.get("time_share"), launches=int(r.get("launches") or 0),
            kernels=int(r.get("kernels") or 0),
            bounds=sorted((r.get("bounds") or {}).items()),
            top_findings=list(r.get("top_findings") or []),
        ))
    return rows


def source_line_rows(item: Mapping[str, Any]) -> list[SourceLineRow]:
    """The source lines a finding names."""
    rows = []
    for s in item.get("source_lines") or []:
        file = str(s.get("file", ""))
        rows.append(SourceLineRow(file=file, short_file=file.rsplit("/", 1)[-1],
                                  line=int(s.get("line") or 0), share_pct=s.get("share_pct"),
                                  sass=str(s.get("sass", "")), stall=s.get("stall")))
    return rows


def group_findings(rows: list, items: list[Mapping[str, Any]],
                   kernels: list[Mapping[str, Any]], indexes: list[list[int | None]],
                   group_by: str | None) -> list[FindingGroup]:
    """Group the application's finding rows by kernel, NVTX region or origin.

    Args:
        rows: the finding rows, in rank order.
        items: the ranked findings of the JSON result, one per row.
        kernels: the JSON result's kernels.
        indexes: for each row, the kernel entries it names.
        group_by: ``kernel``, ``nvtx`` or ``origin``; None for no grouping.

    Returns:
        The groups, largest estimated saving first; empty when ``group_by`` is None.

    """
    if not group_by:
        return []
    groups: dict[str, FindingGroup] = {}
    for row, item, idx in zip(rows, items, indexes, strict=True):
        named = [kernels[i] for i in idx if i is not None]
        if group_by == "kernel":
            key = str(item.get("kernel") or "application")
        elif group_by == "nvtx":
            ranges = list(dict.fromkeys(str(k.get("nvtx") or OUTSIDE) for k in named))
            key = " + ".join(ranges) if ranges else "application"
        else:
            origins = list(dict.fromkeys(str(k.get("origin") or "unknown") for k in named))
            key = " + ".join(origins) if origins else "application"
        group = groups.setdefault(key, FindingGroup(key, 0.0))
        group.rows.append(row)
        group.saving_ns += item.get("estimated_saving_ns") or 0.0
    return sorted(groups.values(), key=lambda g: -g.saving_ns)
