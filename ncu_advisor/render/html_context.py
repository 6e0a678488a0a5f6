"""View-model of the report's context: validity, NVTX regions, source lines, finding groups.

The rest of the page's view-model is :mod:`.html_view`; its ``build_page`` calls these. They
read the JSON contract's keys directly (``docs/json-contract.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..analysis.regions import OUTSIDE

GROUP_BY = ("kernel", "nvtx", "origin")


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
    return [ValidityRow(e["check"], e["severity"], e["message"]) for e in result["validity"]]


def region_rows(result: Mapping[str, Any]) -> list[RegionRow]:
    """The NVTX regions of a result, outer before inner."""
    return [RegionRow(
        name=r["name"], leaf=r["name"].rsplit("/", 1)[-1] if r["depth"] else r["name"],
        depth=r["depth"], duration_ns=r["duration_ns"], self_duration_ns=r["self_duration_ns"],
        time_share=r["time_share"], launches=r["launches"], kernels=r["kernels"],
        bounds=sorted(r["bounds"].items()), top_findings=r["top_findings"],
    ) for r in result["regions"]]


def source_line_rows(item: Mapping[str, Any]) -> list[SourceLineRow]:
    """The source lines a finding names (``stall`` only on stall findings)."""
    return [SourceLineRow(file=s["file"], short_file=s["file"].rsplit("/", 1)[-1],
                          line=s["line"], share_pct=s["share_pct"], sass=s["sass"],
                          stall=s.get("stall"))
            for s in item["source_lines"]]


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
            key = item["kernel"]
        elif group_by == "nvtx":
            ranges = list(dict.fromkeys(k["nvtx"] or OUTSIDE for k in named))
            key = " + ".join(ranges) if ranges else "application"
        else:
            origins = list(dict.fromkeys(k["origin"] or "unknown" for k in named))
            key = " + ".join(origins) if origins else "application"
        group = groups.setdefault(key, FindingGroup(key, 0.0))
        group.rows.append(row)
        group.saving_ns += item["estimated_saving_ns"] or 0.0
    return sorted(groups.values(), key=lambda g: -g.saving_ns)
