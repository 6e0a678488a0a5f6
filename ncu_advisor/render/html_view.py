"""The HTML report's view-model: the JSON-contract dictionary -> plain dataclasses.

``build_page(result)`` reads the dictionary
:meth:`ncu_advisor.analysis.result.Analysis.to_dict` writes
(``docs/json-contract.md``) and indexes the keys it always writes. What a small ncu set did not
measure is ``null`` there; the view-model keeps ``None`` and the format filters
(:mod:`ncu_advisor.render.formats`) print "not measured" for it. The rows of the report's
context (validity, NVTX regions, source lines, finding groups) are in :mod:`.html_context`.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from ..checklist import SEVERITIES
from .charts import BOUND_COLORS, roofline_svg
from .formats import FILTERS, as_number, as_text, fmt_bytes, fmt_num, scaled
from .html_context import (
    FindingGroup,
    RegionRow,
    SourceLineRow,
    ValidityRow,
    group_findings,
    region_rows,
    source_line_rows,
    validity_rows,
)

BOUNDS = tuple(BOUND_COLORS)
# Occupancy block limits, in the order ncu's Occupancy section lists them.
LIMIT_LABELS = {
    "registers": "Registers",
    "shared_mem": "Shared memory",
    "warps": "Warps",
    "blocks": "Blocks per SM",
    "barriers": "Barriers",
}
# Labels of the occupancy dictionary's other keys (unknown keys get their name, de-snaked).
OCCUPANCY_LABELS = {
    "registers_per_thread": "Registers per thread",
    "shared_mem_per_block": "Shared memory per block",
    "block_size": "Block size",
    "calc_theoretical_pct": "Theoretical (calculator)",
    "calc_limiter": "Limiter (calculator)",
    "recommended_block_size": "Suggested block size",
}
# Session facts shown first in the header, with their labels; other scalar keys follow.
SESSION_LABELS = {
    "gpu": "GPU",
    "cc": "Compute capability",
    "sm_count": "SMs",
    "ncu_version": "Nsight Compute",
    "set": "Section set",
    "clock_control": "Clock control",
    "cache_control": "Cache control",
    "driver": "Driver",
    "sm_clock_hz": "SM clock",
    "dram_clock_hz": "DRAM clock",
    "l2_bytes": "L2 cache",
    "memory_bus_width_bits": "Memory bus",
}
# A raw-metrics appendix longer than this stays collapsed in print (a full set is ~2,000 rows
# per kernel: hundreds of pages).
PRINT_METRICS_MAX = 300


# A big run's page (a 15,000-launch capture was 187 MB of HTML, 177 MB of it one section per
# launch): above KERNEL_ROWS_LIMIT launches the kernel table sums launches of one name and
# shape, sections and roofline points are drawn for the DETAIL_LIMIT largest groups, and the
# findings list is cut; report.json keeps everything.
KERNEL_ROWS_LIMIT = 300
DETAIL_LIMIT = 60
FINDING_ROWS_LIMIT = 400
INFO_ROWS_LIMIT = 100
# What the page of a big run reads of the kernels it gives no section: the kernel table
# (group key, time, bound, findings' severities), links and the NVTX or origin groups, and the
# chart's roofs (the device peaks of every launch). Every launch's whole entry was ~23 KB,
# 1.5 GB for the 66,798 launches of 1 GB of text output (render/html.py, page_document).
OVERVIEW_FIELDS = (
    "id", "launch", "source", "name", "short_name", "grid", "block", "invocations",
    "duration_ns", "time_share", "nvtx", "origin", "findings.severity", "roofline.bound",
    "roofline.precision", "roofline.peak_flops", "roofline.peak_bandwidth", "roofline.peaks",
    "roofline.levels",
)


@dataclass
class Fact:
    """A labelled header fact (text from the input, escaped when rendered)."""

    label: str
    value: str | None


@dataclass
class Header:
    """The page header: where the data comes from."""

    title: str
    tool: str
    generated_at: str | None
    command: str | None
    sources: list[str]
    facts: list[Fact]
    warnings: list[str]


@dataclass
class KernelBar:
    """One kernel in the "where GPU time goes" bar list."""

    label: str
    name: str
    anchor: str | None
    duration_ns: float | None
    share: float | None
    bound: str


@dataclass
class BoundShare:
    """One bound in the bound mix: how many kernels and how much GPU time."""

    bound: str
    count: int
    share: float | None


@dataclass
class Summary:
    """Where GPU time goes."""

    launch_count: int | None
    kernel_count: int | None
    total_duration_ns: float | None
    top: list[KernelBar]
    other_share: float | None
    bounds: list[BoundShare]


@dataclass
class Evidence:
    """One measured value behind a finding."""

    label: str
    value: Any
    unit: str | None


@dataclass
class KernelLink:
    """A link from a finding to a kernel section (and to its other launches)."""

    label: str
    anchor: str | None
    launches: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class FindingRow:
    """A finding, either in the application table or in a kernel section."""

    rank: int
    severity: str
    severity_order: int
    confidence: str | None
    category: str | None
    rule: str | None
    title: str
    kernels: list[KernelLink]
    launches: int | None
    saving_ns: float | None
    app_saving_pct: float | None
    speedup_pct: float | None
    advice: str | None
    demo: str | None
    evidence: list[Evidence]
    evidence_source: str | None = None  # metrics, ncu-rule, both
    note: str | None = None  # why severity or advice were adjusted (library kernel, ...)
    source_lines: list[SourceLineRow] = field(default_factory=list)
    source_cause: str | None = None
    collect_with: str | None = None


@dataclass
class Quantity:
    """A named derived quantity of one kernel."""

    key: str
    label: str
    value: Any
    unit: str | None


@dataclass
class LevelRow:
    """One memory level of a kernel's roofline."""

    level: str
    bytes: float | None
    intensity: float | None
    bandwidth: float | None
    peak_bandwidth: float | None


@dataclass
class PrecisionRow:
    """Operations of one precision (a count) and the device's peak rate for it."""

    precision: str
    operations: float | None
    peak: float | None


@dataclass
class RooflineView:
    """A kernel's roofline position."""

    bound: str
    precision: str | None
    intensity: float | None
    ridge_point: float | None
    achieved_flops: float | None
    peak_flops: float | None
    achieved_bandwidth: float | None
    peak_bandwidth: float | None
    pct_of_roof: float | None
    evidence: str | None
    levels: list[LevelRow]
    precisions: list[PrecisionRow]


@dataclass
class LimitRow:
    """One occupancy limiter: blocks per SM it allows."""

    name: str
    label: str
    blocks: Any
    is_limiter: bool


@dataclass
class OccupancyView:
    """A kernel's occupancy."""

    theoretical_pct: float | None
    achieved_pct: float | None
    limiter: str | None
    waves_per_sm: float | None
    limits: list[LimitRow]
    extra: list[Quantity]


@dataclass
class NcuRuleRow:
    """One result of Nsight Compute's own rules (kept apart from ours)."""

    rule: str
    section: str | None
    type: str | None
    title: str | None
    description: str | None
    speedup_type: str | None
    speedup: float | None


@dataclass
class NotEvaluatedRow:
    """A rule that could not run on this input: what is missing and how to collect it."""

    rule: str
    category: str | None
    missing: list[str]
    collect_with: str | None


@dataclass
class MetricRow:
    """One raw metric for the appendix."""

    metric: str
    section: str | None
    label: str | None
    unit: str | None
    value: Any


@dataclass
class KernelSection:
    """Everything about one kernel (one profiled launch, or one kernel of a summary)."""

    anchor: str
    index: int
    id: Any
    name: str
    short_name: str
    source: str | None
    grid: Any
    origin_label: str | None
    block: Any
    facts: list[Fact]
    invocations: Any
    duration_ns: float | None
    time_share: float | None
    bound: str
    limiter: str | None  # its one limiter in words, with the headroom (derive/limiter.py)
    quantities: list[Quantity]
    roofline: RooflineView | None
    occupancy: OccupancyView | None
    findings: list[FindingRow]
    not_evaluated: list[NotEvaluatedRow]
    ncu_rules: list[NcuRuleRow]
    metrics: list[MetricRow] | None
    metrics_labelled: bool
    metrics_print: bool
    metrics_rows: Markup
    top_severity: str | None


@dataclass
class KernelGroupRow:
    """Launches of one kernel and launch shape, summed: the kernel table of a big run."""

    anchor: str | None  # its representative's section (the longest launch), if rendered
    index: int
    name: str
    short_name: str
    grid: Any
    block: Any
    launches: int
    duration_ns: float | None  # summed over launches and invocations
    time_share: float | None
    bound: str
    findings: int
    top_severity: str | None


@dataclass
class BigRun:
    """What a big run's page leaves out, and where the rest is."""

    launches: int
    groups: int
    groups_shown: int
    sections: int
    findings_shown: int
    findings: int
    roofline_points: int


@dataclass
class Page:
    """The whole report page."""

    header: Header
    summary: Summary
    roofline_svg: Markup | None
    roofline_unplotted: int
    findings: list[FindingRow]
    app_not_evaluated: list[NotEvaluatedRow]
    kernels: list[KernelSection]
    severities: list[str]
    severity_counts: list[tuple[str, int]]
    validity: list[ValidityRow] = field(default_factory=list)
    regions: list[RegionRow] = field(default_factory=list)
    actions: list[Mapping[str, Any]] = field(default_factory=list)  # the JSON's, ranked
    finding_groups: list[FindingGroup] = field(default_factory=list)
    group_by: str | None = None
    bound_colors: dict[str, str] = field(default_factory=lambda: dict(BOUND_COLORS))
    kernel_groups: list[KernelGroupRow] | None = None  # a big run's kernel table
    big: BigRun | None = None


def _severity(severity: str) -> tuple[str, int]:
    """Return the severity name and its order (0 = most severe)."""
    return severity, SEVERITIES.index(severity)


def _limiter_text(entry: Mapping[str, Any] | None) -> str | None:
    """``L2 at 85% of its peak (15% headroom)``, ``latency: too few warps`` (None: unknown)."""
    if not entry or entry["kind"] == "unknown":
        return None
    pct, room = entry["utilization_pct"], entry["headroom_pct"]
    if entry["kind"] in ("memory", "pipe", "issue") and pct is not None:
        return f"{entry['unit']} at {pct:.0f}% of its peak ({room:.0f}% headroom)"
    if entry["kind"] == "latency":
        busiest = f"; the busiest unit at {pct:.0f}% of its peak" if pct is not None else ""
        return f"latency: {entry['unit']}{busiest}"
    if entry["kind"] == "launch-shape" and pct is not None:
        if entry["unit"] == "idle SMs":
            return f"launch shape: the grid fills {pct:.0f}% of the SMs"
        return f"launch shape: {entry['unit']} ({pct:.0f}% of one)"
    return entry["unit"]


def _bound(kernel: Mapping[str, Any]) -> str:
    """Return a kernel's bound, 'unknown' when not measured."""
    return kernel["roofline"]["bound"] or "unknown"


def _evidence(evidence: Mapping[str, Mapping[str, Any]]) -> list[Evidence]:
    """Turn a finding's ``evidence`` mapping (name -> value, unit, label) into rows."""
    return [Evidence(label=item["label"], value=item["value"], unit=as_text(item["unit"]))
            for item in evidence.values()]


class _Anchors:
    """Anchors of the kernel sections, found by the ``id`` the findings use.

    ``shown`` maps a kernel's index to the index of the section that stands for it (itself,
    or in a big run its group's representative; missing: no section).
    """

    def __init__(self, kernels: list[Mapping[str, Any]],
                 shown: Mapping[int, int] | None = None) -> None:
        self.by_id: dict[Any, int] = {}
        self.by_launch: dict[int, int] = {}
        self.shown = shown
        for index, kernel in enumerate(kernels):
            self.by_id.setdefault(kernel["id"], index)
            self.by_launch.setdefault(kernel["launch"], index)

    def link(self, index: int) -> str | None:
        """The anchor a link to the index-th kernel goes to (None: no section for it)."""
        if self.shown is None:
            return self.anchor(index)
        target = self.shown.get(index)
        return None if target is None else self.anchor(target)

    def indexes(self, finding: Mapping[str, Any]) -> list[int | None]:
        """The kernel sections a finding names.

        By the unique ``launch_ids`` when given (ncu's ``id`` repeats across input files),
        else by ``kernel_ids``.
        """
        if finding["launch_ids"]:
            return [self.by_launch.get(i) for i in finding["launch_ids"]]
        return [self.by_id.get(i) for i in finding["kernel_ids"]]

    @staticmethod
    def anchor(index: int) -> str:
        """Return the HTML id of the index-th kernel section."""
        return f"k-{index}"

    def for_launch(self, launch: int) -> str | None:
        """Return the anchor of the kernel section of one launch."""
        index = self.by_launch.get(launch)
        return None if index is None else self.link(index)


def _session_value(key: str, value: Any) -> str | None:
    """Format a session fact by the unit its key names (``_hz``, ``_bytes``, ``_bits``)."""
    if isinstance(value, list | tuple):
        return ", ".join(filter(None, (as_text(v) for v in value))) or None
    if as_number(value) is None:
        return as_text(value)
    if key.endswith("_hz"):
        return scaled(float(value), [(1e9, "GHz"), (1e6, "MHz"), (1e3, "kHz"), (1.0, "Hz")])
    if key.endswith("_bytes"):
        return str(fmt_bytes(value))
    if key.endswith("_bits"):
        return f"{fmt_num(value)} bits"
    return str(fmt_num(value))


def _timestamp(value: str) -> str:
    """Print an ISO timestamp as ``2026-11-29 19:40:00 UTC``."""
    stamp = dt.datetime.fromisoformat(value)
    if stamp.utcoffset() == dt.timedelta(0):
        return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
    return stamp.isoformat(sep=" ")


def _header(result: Mapping[str, Any]) -> Header:
    session = result["session"]
    facts = []
    for key, label in SESSION_LABELS.items():
        text = _session_value(key, session.get(key))  # a capture names only what it recorded
        # The GPU and the ncu version always show (as "not measured" when absent).
        if text or key in ("gpu", "ncu_version"):
            facts.append(Fact(label, text))
    # Other scalar facts the input holds, in its order.
    for key, value in session.items():
        if key in SESSION_LABELS or isinstance(value, Mapping):
            continue
        text = _session_value(str(key), value)
        if text:
            facts.append(Fact(str(key).replace("_", " "), text))
    gpu = as_text(session.get("gpu"))
    tool = result["tool"]
    return Header(
        title=f"ncu-advise report \u2014 {gpu}" if gpu else "ncu-advise report",
        tool=f"{tool['name']} {tool['version']}",
        generated_at=_timestamp(result["generated_at"]),
        command=shlex.join(result["command"]) if result["command"] else None,
        sources=[s for s in (as_text(x) for x in result["sources"]) if s],
        facts=facts,
        warnings=[w for w in (as_text(x) for x in result["warnings"]) if w],
    )


def _summary(result: Mapping[str, Any], kernels: list[Mapping[str, Any]],
             anchors: _Anchors) -> Summary:
    summary = result["summary"]
    top = [KernelBar(label=item["short_name"], name=item["name"],
                     anchor=anchors.for_launch(item["launch"]),
                     duration_ns=item["duration_ns"], share=item["time_share"],
                     bound=item["bound"] or "unknown")
           for item in summary["top_kernels"]]
    shown = [b.share for b in top if b.share is not None]
    other = max(0.0, 1.0 - sum(shown)) if shown else None
    # The bound mix: launch counts from the summary, GPU time from the kernels.
    counts = summary["bounds"]
    shares: dict[str, float] = dict.fromkeys(BOUNDS, 0.0)
    for kernel in kernels:
        shares[_bound(kernel)] += kernel["time_share"] or 0.0
    have_shares = any(k["time_share"] is not None for k in kernels)
    return Summary(
        launch_count=summary["launch_count"],
        kernel_count=summary["kernel_count"],
        total_duration_ns=summary["total_duration_ns"],
        top=top,
        other_share=other if other is not None and other > 0.0005 else None,
        bounds=[BoundShare(b, counts[b], shares[b] if have_shares else None)
                for b in BOUNDS if counts[b] or shares[b]],
    )


def _finding(item: Mapping[str, Any], rank: int, links: list[KernelLink]) -> FindingRow:
    """One finding row; ``launches`` and ``app_saving_pct`` exist in the ranked list only."""
    severity, order = _severity(item["severity"])
    return FindingRow(
        rank=rank,
        severity=severity,
        severity_order=order,
        confidence=item["confidence"],
        category=item["category"],
        rule=item["rule"],
        title=item["title"],
        kernels=links,
        launches=item.get("launches"),
        saving_ns=item["estimated_saving_ns"],
        app_saving_pct=item.get("app_saving_pct"),
        speedup_pct=item.get("estimated_speedup_pct"),
        advice=as_text(item["advice"]),
        demo=item["demo"],
        evidence_source=item["evidence_source"],
        note=item["note"],
        evidence=_evidence(item["evidence"]),
        source_lines=source_line_rows(item),
        source_cause=item["source_cause"],
        collect_with=item["collect_with"],
    )


def _kernel_links(indexes: list[int | None], kernels: list[Mapping[str, Any]],
                  anchors: _Anchors) -> list[KernelLink]:
    """Link a finding's kernels, one entry per short name with its launches listed."""
    links: dict[str, KernelLink] = {}
    for index in indexes:
        if index is None:
            continue
        label = kernels[index]["short_name"]
        anchor = anchors.link(index)
        link = links.setdefault(label, KernelLink(label, anchor))
        link.launches.append((f"#{index}", anchor))
    for link in links.values():
        if len(link.launches) < 2:
            link.launches = []
    return list(links.values())


def _app_findings(result: Mapping[str, Any], kernels: list[Mapping[str, Any]],
                  anchors: _Anchors) -> list[FindingRow]:
    rows = []
    for rank, item in enumerate(result["findings"], start=1):
        links = _kernel_links(anchors.indexes(item), kernels, anchors)
        if not links:
            # No kernel section: an application-level finding; show the kernel text it gives.
            links = [KernelLink(item["kernel"], None)]
        rows.append(_finding(item, rank, links))
    return rows


def _roofline(roof: Mapping[str, Any]) -> RooflineView | None:
    """A kernel's roofline; None when the input placed it on no roof and measured no traffic."""
    if roof["bound"] is None and all(roof[k] is None for k in _ROOFLINE_POSITION):
        return None
    levels = [LevelRow(level=name, bytes=v["bytes"], intensity=v["intensity"],
                       bandwidth=v["bandwidth"], peak_bandwidth=v["peak_bandwidth"])
              for name, v in roof["levels"].items()]
    flops, peaks = roof["flops"], roof["peaks"]
    precisions = [PrecisionRow(p, flops.get(p), peaks.get(p))
                  for p in dict.fromkeys([*flops, *peaks])
                  if flops.get(p) is not None or peaks.get(p) is not None]
    return RooflineView(
        bound=roof["bound"] or "unknown",
        precision=roof["precision"],
        intensity=roof["arithmetic_intensity"],
        ridge_point=roof["ridge_point"],
        achieved_flops=roof["achieved_flops"],
        peak_flops=roof["peak_flops"],
        achieved_bandwidth=roof["achieved_bandwidth"],
        peak_bandwidth=roof["peak_bandwidth"],
        pct_of_roof=roof["pct_of_roof"],
        evidence=as_text(roof["evidence"]),
        levels=levels,
        precisions=precisions,
    )


_ROOFLINE_POSITION = ("arithmetic_intensity", "achieved_flops", "achieved_bandwidth")


def _unit_of_key(key: str) -> str | None:
    """Guess a unit from a key's name, for the contract's plain-number extras."""
    if key.endswith("_pct"):
        return "%"
    if key.endswith("_ns"):
        return "ns"
    if "shared_mem" in key or key.endswith("_bytes"):
        return "byte"
    return None


# Launch-shape facts shown under occupancy (contract field ``launch_shape``).
SHAPE_LABELS = {
    "blocks_per_sm": ("Resident blocks per SM", ""),
    "full_waves": ("Full waves", ""),
    "partial_wave_fill": ("Last wave filled", "%"),
    # The same figure as the launch-config.tail-effect finding (derive/launch_shape.py).
    "tail_idle_slots_pct": ("Time lost to the partial last wave", "%"),
    "tail_effect_pct": ("ncu's upper bound for the tail", "%"),
    "idle_sm_pct": ("SMs left without a block", "%"),
    "wasted_lanes_pct": ("Idle lanes in partial warps", "%"),
}
_OCCUPANCY_SHOWN = {"theoretical_pct", "achieved_pct", "limiter", "limits", "waves_per_sm"}


def _occupancy(occ: Mapping[str, Any], shape: Mapping[str, Any]) -> OccupancyView | None:
    """A kernel's occupancy; None when the input measured none of it.

    ``shape`` is empty when the report lacks the launch metrics.
    """
    if all(v is None for v in [*occ["limits"].values(), *occ.values()] if not isinstance(v, dict)):
        return None
    limiter = occ["limiter"]
    limits = [LimitRow(name=k, label=LIMIT_LABELS[k], blocks=v, is_limiter=k == limiter)
              for k, v in occ["limits"].items()]
    extra = [Quantity(key, OCCUPANCY_LABELS.get(key) or key.replace("_", " ").capitalize(),
                      item, _unit_of_key(key))
             for key, item in occ.items() if key not in _OCCUPANCY_SHOWN]
    for key, (label, unit) in SHAPE_LABELS.items():
        item = shape.get(key)
        if item is not None:
            extra.append(Quantity(key, label, item * 100 if key == "partial_wave_fill" else item,
                                  unit))
    return OccupancyView(
        theoretical_pct=occ["theoretical_pct"],
        achieved_pct=occ["achieved_pct"],
        limiter=limiter,
        waves_per_sm=occ["waves_per_sm"],
        limits=limits,
        extra=extra,
    )


def _not_evaluated(entries: list[Mapping[str, Any]]) -> list[NotEvaluatedRow]:
    """Turn a contract ``not_evaluated`` list into rows."""
    return [NotEvaluatedRow(rule=n["rule"], category=n["category"], missing=list(n["missing"]),
                            collect_with=n["collect_with"])
            for n in entries]


def _metric(m: Mapping[str, Any]) -> MetricRow:
    """One raw metric: its number when it has one, else the text ncu printed."""
    return MetricRow(metric=m["metric"], section=as_text(m["section"]), label=as_text(m["label"]),
                     unit=as_text(m["unit"]),
                     value=m["value"] if m["value"] is not None else as_text(m["text"]))


def _metric_rows(metrics: list[MetricRow], labelled: bool) -> Markup:
    """The raw-metrics table's rows, escaped here rather than cell by cell in the template.

    A kernel has hundreds to thousands of raw metrics (2,300 under ``--set full``); written by
    the template's loop they were most of a small run's page time (0.4 s of 0.55 s for 9
    launches). Same markup as a template row: every cell escaped, ``qty`` on the value.
    """
    qty = FILTERS["qty"]
    rows = []
    for m in metrics:
        middle = (f"<td>{escape(m.section or '')}</td><td>{escape(m.label or '')}</td>"
                  if labelled else "")
        rows.append(f"<tr><td>{escape(m.metric)}</td>{middle}<td>{escape(qty(m.value))}</td>"
                    f"<td>{escape(m.unit or '')}</td></tr>\n")
    return Markup("".join(rows))


_KERNEL_FACTS = (("id", "ncu ID"), ("stream", "Stream"), ("nvtx", "NVTX range"),
                 ("device", "Device"), ("cc", "CC"))


def _kernel(index: int, kernel: Mapping[str, Any]) -> KernelSection:
    facts = [Fact(label, text) for key, label in _KERNEL_FACTS
             if (text := as_text(kernel[key]))]
    quantities = [Quantity(key, item["label"], item["value"], as_text(item["unit"]))
                  for key, item in kernel["quantities"].items()]
    findings = [_finding(f, rank, []) for rank, f in enumerate(kernel["findings"], start=1)]
    ncu_rules = [
        NcuRuleRow(rule=r["rule"], section=r["section"], type=r["type"], title=r["title"],
                   description=as_text(r["description"]), speedup_type=r["speedup_type"],
                   speedup=r["speedup"])
        # ncu repeats some rules with no type or text (a second table row); they say nothing.
        for r in kernel["ncu_rules"] if r["type"] or r["title"] or as_text(r["description"])]
    # The raw metrics are in the result only when asked for (``include_metrics``).
    metrics = [_metric(m) for m in kernel["metrics"]] if "metrics" in kernel else None
    bound = _bound(kernel)
    return KernelSection(
        anchor=_Anchors.anchor(index),
        index=index,
        id=kernel["id"],
        name=kernel["name"],
        short_name=kernel["short_name"],
        origin_label=kernel["origin_label"],
        source=kernel["source"],
        grid=kernel["grid"],
        block=kernel["block"],
        facts=facts,
        invocations=kernel["invocations"],
        duration_ns=kernel["duration_ns"],
        time_share=kernel["time_share"],
        bound=bound,
        limiter=_limiter_text(kernel.get("limiter")),
        quantities=quantities,
        roofline=_roofline(kernel["roofline"]),
        occupancy=_occupancy(kernel["occupancy"], kernel["launch_shape"]),
        findings=findings,
        not_evaluated=_not_evaluated(kernel["not_evaluated"]),
        ncu_rules=ncu_rules,
        metrics=metrics,
        metrics_labelled=(labelled := any(m.label or m.section for m in metrics or [])),
        metrics_print=len(metrics or []) <= PRINT_METRICS_MAX,
        metrics_rows=_metric_rows(metrics or [], labelled),
        top_severity=min(findings, key=lambda f: f.severity_order).severity if findings else None,
    )


def build_page(result: Mapping[str, Any], group_by: str | None = None) -> Page:
    """Build the report's view-model from the JSON-contract dictionary.

    Args:
        result: the dictionary ``ncu-advise analyze --format json`` prints
            (:meth:`ncu_advisor.analysis.result.Analysis.to_dict`).
        group_by: group the application's findings by ``kernel``, ``nvtx`` or ``origin``.

    Returns:
        The :class:`Page` the templates render.

    """
    kernels = result["kernels"]
    big = len(kernels) > KERNEL_ROWS_LIMIT
    groups = _kernel_groups(kernels) if big else None
    shown: dict[int, int] | None = None
    detail = sections(kernels)
    if groups is not None:  # sections for the representatives of the largest groups only
        rendered = set(detail)
        shown = {i: g.index for g in groups if g.index in rendered for i in g.members}
        for g in groups:
            g.row.anchor = _Anchors.anchor(g.index) if g.index in rendered else None
    anchors = _Anchors(kernels, shown)
    svg = roofline_svg(result, only=set(detail) if big else None)
    findings = _app_findings(result, kernels, anchors)
    plotted = sum(1 for i in detail
                  if (kernels[i]["roofline"]["arithmetic_intensity"] or 0) > 0
                  and (kernels[i]["roofline"]["achieved_flops"] or 0) > 0)
    listed = _bounded_findings(findings) if big else findings
    return Page(
        header=_header(result),
        summary=_summary(result, kernels, anchors),
        # The chart is drawn by our code and escapes its own text: the one trusted markup.
        roofline_svg=Markup(svg) if svg else None,
        roofline_unplotted=len(detail) - plotted if svg else 0,
        findings=listed,
        app_not_evaluated=_not_evaluated(result["summary"]["application_not_evaluated"]),
        kernels=[_kernel(i, kernels[i]) for i in detail],
        severities=list(SEVERITIES),
        severity_counts=[(sev, n) for sev in SEVERITIES
                         if (n := sum(1 for f in findings if f.severity == sev))],
        validity=validity_rows(result),
        regions=region_rows(result),
        actions=list(result.get("actions", [])),
        finding_groups=group_findings(listed, [result["findings"][f.rank - 1] for f in listed],
                                      kernels, [anchors.indexes(result["findings"][f.rank - 1])
                                                for f in listed], group_by),
        group_by=group_by,
        kernel_groups=[g.row for g in groups[:KERNEL_ROWS_LIMIT]] if groups else None,
        big=BigRun(launches=len(kernels), groups=len(groups), groups_shown=min(
            len(groups), KERNEL_ROWS_LIMIT), sections=len(detail), findings_shown=len(listed),
            findings=len(findings), roofline_points=plotted) if groups is not None else None,
    )


def sections(kernels: list[Mapping[str, Any]]) -> list[int]:
    """The indexes of the kernels the page gives a section (reads whole), in order.

    Every kernel; in a big run (more than :data:`KERNEL_ROWS_LIMIT`), the longest launch of
    each of the :data:`DETAIL_LIMIT` groups of one name and launch shape that took the most
    time. Reads the :data:`OVERVIEW_FIELDS` of each.
    """
    if len(kernels) <= KERNEL_ROWS_LIMIT:
        return list(range(len(kernels)))
    from ..analysis.contract import shape_groups

    return sorted(g.first for g in shape_groups(kernels)[:DETAIL_LIMIT])


@dataclass
class _Group:
    index: int  # the representative: the longest launch
    members: list[int]
    row: KernelGroupRow


def _kernel_groups(kernels: list[Mapping[str, Any]]) -> list[_Group]:
    """Launches of one kernel name and launch shape, largest summed time first."""
    from ..analysis.contract import shape_groups

    groups = []
    for g in shape_groups(kernels):
        k = kernels[g.first]
        severities = [f["severity"] for i in g.members for f in kernels[i]["findings"]]
        groups.append(_Group(g.first, g.members, KernelGroupRow(
            anchor=None, index=g.first, name=k["name"], short_name=k["short_name"],
            grid=k["grid"], block=k["block"], launches=g.launches, duration_ns=g.time_ns,
            time_share=g.time_share, bound=_bound(k), findings=len(severities),
            top_severity=min(severities, key=SEVERITIES.index) if severities else None)))
    return groups


def _bounded_findings(findings: list[FindingRow]) -> list[FindingRow]:
    """The best-ranked findings that ask for a change, then info notes, in rank order."""
    asks = [f for f in findings if f.severity != "info"][:FINDING_ROWS_LIMIT]
    notes = [f for f in findings if f.severity == "info"][:INFO_ROWS_LIMIT]
    return sorted(asks + notes, key=lambda f: f.rank)
