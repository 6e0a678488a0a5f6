"""NVTX regions: GPU time, launches, bounds and top findings per push/pop range.

A launch's ``nvtx`` holds the ranges open when it ran, outer to inner (``model/block0/fc1``).
Every level of that path is a region of its own, summed over all launches inside it, so
``model`` holds ``model/block0`` which holds ``model/block0/fc1``; ``self_duration_ns`` is
the time of launches directly in a region and in none of its inner ones. Launches outside
every range form the region ``OUTSIDE``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..rules_engine.findings import SEVERITY_RANK, Finding

OUTSIDE = "(outside any NVTX range)"
_TOP_FINDINGS = 3


@dataclass
class Region:
    """One NVTX range (every nesting level is one), or the launches outside all of them."""

    name: str
    depth: int
    parent: str | None
    duration_ns: float = 0.0
    self_duration_ns: float = 0.0
    time_share: float | None = None
    launches: int = 0
    kernels: int = 0
    kernel_names: list[str] = field(default_factory=list)
    bounds: dict[str, int] = field(default_factory=dict)
    launch_ids: list[int] = field(default_factory=list)
    top_findings: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Return the JSON form (``regions`` entries of the contract)."""
        return asdict(self)


def _levels(path: str | None) -> list[str]:
    """``a/b/c`` -> ``["a", "a/b", "a/b/c"]``; no range -> the outside region."""
    if not isinstance(path, str) or not path:
        return [OUTSIDE]
    parts = path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def summarize_regions(launches: pd.DataFrame, bounds: dict[int, str | None],
                      findings: list[Finding]) -> list[Region]:
    """Summarize launches per NVTX range, outer ranges before their inner ones.

    Args:
        launches: the Report's launch table (``launch``, ``short_name``, ``nvtx``,
            ``duration_ns``, ``invocations``).
        bounds: each launch's roofline bound (``memory``, ``compute``, ``latency`` or None).
        findings: the kernel findings of the analysis.

    Returns:
        The regions, depth first (inner ranges after their outer one, larger first), the
        outside region last; empty when no launch ran inside an NVTX range.

    """
    if launches.empty or not launches["nvtx"].notna().any():
        return []
    weight = launches["invocations"].fillna(1).astype(float)
    time = (launches["duration_ns"].astype(float) * weight).fillna(0.0).to_numpy()
    total = float(np.nansum(time))
    regions: dict[str, Region] = {}
    kernel_sets: dict[str, dict[str, None]] = {}
    for i, row in enumerate(launches.itertuples(index=False)):
        levels = _levels(row.nvtx)
        for depth, name in enumerate(levels):
            region = regions.get(name)
            if region is None:
                parent = levels[depth - 1] if depth else None
                region = regions[name] = Region(name=name, depth=depth, parent=parent)
                kernel_sets[name] = {}
            region.duration_ns += time[i]
            region.launches += int(weight.iloc[i])
            region.launch_ids.append(int(row.launch))
            kernel_sets[name].setdefault(str(row.short_name))
            bound = bounds.get(int(row.launch)) or "unknown"
            region.bounds[bound] = region.bounds.get(bound, 0) + 1
        regions[levels[-1]].self_duration_ns += time[i]
    by_launch: dict[int, list[Finding]] = {}
    for f in findings:
        if f.launch is not None:
            by_launch.setdefault(int(f.launch), []).append(f)
    invocations = dict(zip(launches["launch"].astype(int), weight, strict=True))
    for name, region in regions.items():
        region.kernel_names = list(kernel_sets[name])
        region.kernels = len(region.kernel_names)
        region.time_share = region.duration_ns / total if total else None
        region.top_findings = _top_findings(region.launch_ids, by_launch, invocations,
                                            launches.set_index("launch")["short_name"])
    return _ordered(regions)


def _top_findings(launch_ids: list[int], by_launch: dict[int, list[Finding]],
                  invocations: dict[int, float], names: pd.Series) -> list[dict]:
    """The region's findings grouped by rule and kernel, largest saving in the run first."""
    groups: dict[tuple[str, str], dict] = {}
    for launch in launch_ids:
        for f in by_launch.get(launch, []):
            kernel = str(names.loc[launch])
            g = groups.setdefault((f.rule, kernel), {
                "rule": f.rule, "category": f.category, "severity": f.severity,
                "title": f.title, "kernel": kernel, "launches": 0,
                "estimated_saving_ns": 0.0})
            g["launches"] += int(invocations.get(launch, 1))
            # The estimate covers every invocation of its row already.
            g["estimated_saving_ns"] += f.estimated_saving_ns or 0.0
            if SEVERITY_RANK[f.severity] < SEVERITY_RANK[g["severity"]]:
                g["severity"], g["title"] = f.severity, f.title
    ranked = sorted(groups.values(), key=lambda g: (-g["estimated_saving_ns"],
                                                    SEVERITY_RANK[g["severity"]]))
    return ranked[:_TOP_FINDINGS]


def _ordered(regions: dict[str, Region]) -> list[Region]:
    """Depth-first order: each region followed by its inner ones, larger first."""
    children: dict[str | None, list[Region]] = {}
    for region in regions.values():
        children.setdefault(region.parent, []).append(region)
    out: list[Region] = []

    def walk(parent: str | None) -> None:
        kids = sorted(children.get(parent, []),
                      key=lambda r: (r.name == OUTSIDE, -r.duration_ns))
        for region in kids:
            out.append(region)
            walk(region.name)

    walk(None)
    return out
