"""The self-contained HTML report.

``render_html(result)`` takes the JSON-contract dictionary (what ``ncu-advise analyze --format
json`` prints), builds a view-model of plain dataclasses from it, and renders that with jinja2
templates that only loop and format.  Everything from the input is escaped by autoescaping; the
roofline SVG from :mod:`ncu_advisor.render.charts` is the only markup marked safe, and it escapes
its own labels.  The page loads nothing: CSS and JS are inlined, there are no fonts or CDNs.

Reports from small ncu sets lack many keys (or hold ``null``): the view-model keeps ``None`` and
the format filters print "not measured" for it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ..rules_engine.findings import SEVERITY_RANK
from .charts import BOUND_COLORS, roofline_svg
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

NOT_MEASURED = Markup('<span class="nm">not measured</span>')
SEVERITIES = tuple(SEVERITY_RANK)  # the rule schema's levels, most severe first
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
_TOP_KERNELS = 10
# A raw-metrics appendix longer than this stays collapsed in print (a full set is ~2,000 rows
# per kernel: hundreds of pages).
PRINT_METRICS_MAX = 300


# ---------------------------------------------------------------------------------------------
# Format filters: every one prints "not measured" for None / NaN.


def _number(value: Any) -> float | None:
    """Return a finite float, or None for missing, NaN, booleans and text."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _scaled(value: float, units: Sequence[tuple[float, str]], digits: int = 3) -> str:
    """Pick the largest unit that keeps the value >= 1 and print ``digits`` significant digits."""
    for factor, unit in units:
        if abs(value) >= factor:
            return f"{_sig(value / factor, digits)} {unit}"
    factor, unit = units[-1]
    return f"{_sig(value / factor, digits)} {unit}"


def _sig(value: float, digits: int = 3) -> str:
    """Print a number with about ``digits`` significant digits and no exponent below 1e15."""
    if value == 0:
        return "0"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_duration(value: Any) -> str:
    """Format nanoseconds as ns / µs / ms / s."""
    v = _number(value)
    if v is None:
        return NOT_MEASURED
    return _scaled(v, [(1e9, "s"), (1e6, "ms"), (1e3, "\u00b5s"), (1.0, "ns")])


def fmt_bytes(value: Any) -> str:
    """Format bytes with decimal prefixes, as ncu does (1 KB = 1000 bytes)."""
    v = _number(value)
    if v is None:
        return NOT_MEASURED
    if abs(v) < 1000:
        return f"{_sig(v)} B"
    return _scaled(v, [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")])


def _si_formatter(unit: str, doc: str):
    """A formatter for ``unit`` with decimal prefixes P, T, G, M, K."""
    steps = [(1e15, f"P{unit}"), (1e12, f"T{unit}"), (1e9, f"G{unit}"), (1e6, f"M{unit}"),
             (1e3, f"K{unit}"), (1.0, unit)]

    def fmt(value: Any) -> str:
        v = _number(value)
        return NOT_MEASURED if v is None else _scaled(v, steps)

    fmt.__doc__ = doc
    return fmt


fmt_bandwidth = _si_formatter("B/s", "Format byte/s with decimal prefixes.")
fmt_flops = _si_formatter("FLOP/s", "Format FLOP/s with SI prefixes.")
fmt_flop = _si_formatter("FLOP", "Format a count of floating-point operations with SI prefixes.")


def fmt_pct(value: Any, digits: int = 1) -> str:
    """Format a value already in percent."""
    v = _number(value)
    if v is None:
        return NOT_MEASURED
    return f"{v:.{digits}f}%"


def fmt_share(value: Any) -> str:
    """Format a fraction (0..1) as a percentage."""
    v = _number(value)
    return NOT_MEASURED if v is None else f"{v * 100:.1f}%"


def fmt_num(value: Any) -> str:
    """Format a plain number: integers with thousands separators, others to 3 digits."""
    v = _number(value)
    if v is None:
        return NOT_MEASURED
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return _sig(v)


def fmt_qty(value: Any, unit: str | None = None) -> str:
    """Format a value by its base unit (the units the JSON contract uses)."""
    if isinstance(value, str):
        return f"{value} {unit}".strip() if unit else value
    unit = (unit or "").strip()
    formatter = _BY_UNIT.get(unit)
    if formatter is not None:
        return formatter(value)
    text = fmt_num(value)
    if isinstance(text, Markup) or not unit:
        return text
    return f"{text} {unit}"


def fmt_dims(value: Any) -> str:
    """Format a launch shape ``[x, y, z]`` as ``x × y × z``."""
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        return NOT_MEASURED
    parts = [fmt_num(v) for v in value]
    if any(isinstance(p, Markup) for p in parts):
        return NOT_MEASURED
    return " \u00d7 ".join(parts)


def fmt_text(value: Any) -> str:
    """Return input text as it is (autoescaped when printed), "not measured" for None."""
    text = _text(value)
    return NOT_MEASURED if text is None else text


def bar_width(value: Any, scale: float = 1.0) -> str:
    """Return a CSS width percentage in [0, 100] for ``value * scale`` (0 when missing)."""
    v = _number(value)
    return "0" if v is None else f"{min(100.0, max(0.0, v * scale)):.2f}"


def sort_key(value: Any) -> str:
    """Return a numeric sort key for a ``data-sort`` attribute ('' sorts last)."""
    v = _number(value)
    return "" if v is None else repr(v)


_BY_UNIT: dict[str, Callable[[Any], str]] = {
    "ns": fmt_duration,
    "%": fmt_pct,
    "byte": fmt_bytes,
    "byte/s": fmt_bandwidth,
    "FLOP/s": fmt_flops,
    "flop/s": fmt_flops,
    "FLOP": fmt_flop,
    "fraction": fmt_share,
}

FILTERS: dict[str, Callable[..., str]] = {
    "duration": fmt_duration,
    "bytes": fmt_bytes,
    "bandwidth": fmt_bandwidth,
    "flops": fmt_flops,
    "flop": fmt_flop,
    "pct": fmt_pct,
    "share": fmt_share,
    "num": fmt_num,
    "qty": fmt_qty,
    "dims": fmt_dims,
    "text": fmt_text,
    "width": bar_width,
    "sortkey": sort_key,
}


# ---------------------------------------------------------------------------------------------
# The view-model.


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
    quantities: list[Quantity]
    roofline: RooflineView | None
    occupancy: OccupancyView | None
    findings: list[FindingRow]
    not_evaluated: list[NotEvaluatedRow]
    ncu_rules: list[NcuRuleRow]
    metrics: list[MetricRow] | None
    metrics_labelled: bool
    metrics_print: bool
    top_severity: str | None


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
    finding_groups: list[FindingGroup] = field(default_factory=list)
    group_by: str | None = None
    bound_colors: dict[str, str] = field(default_factory=lambda: dict(BOUND_COLORS))


def _text(value: Any) -> str | None:
    """Return input text as a str (numbers too), or None when missing/empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def _map(value: Any) -> Mapping[str, Any]:
    """Return ``value`` if it is a mapping, else an empty one (keys may be null)."""
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    """Return ``value`` if it is a list, else an empty one."""
    return list(value) if isinstance(value, list | tuple) else []


def _severity(value: Any) -> tuple[str, int]:
    """Return the severity name and its order (0 = most severe)."""
    sev = (_text(value) or "info").lower()
    order = SEVERITIES.index(sev) if sev in SEVERITIES else len(SEVERITIES)
    return sev, order


def _bound(kernel: Mapping[str, Any]) -> str:
    """Return a kernel's bound, 'unknown' when not measured."""
    bound = _text(_map(kernel.get("roofline")).get("bound"))
    return bound.lower() if bound else "unknown"


def _evidence(value: Any) -> list[Evidence]:
    """Turn a contract ``evidence`` mapping (name -> value/unit/label or a bare value) to rows."""
    rows = []
    for key, item in _map(value).items():
        if isinstance(item, Mapping):
            rows.append(Evidence(label=_text(item.get("label")) or str(key),
                                 value=item.get("value"), unit=_text(item.get("unit"))))
        else:
            rows.append(Evidence(label=str(key), value=item, unit=None))
    return rows


class _Anchors:
    """Anchors of the kernel sections, found by the ``id`` the findings use."""

    def __init__(self, kernels: list[Mapping[str, Any]]) -> None:
        self.by_id: dict[Any, int] = {}
        self.by_launch: dict[Any, int] = {}
        for index, kernel in enumerate(kernels):
            self.by_id.setdefault(kernel.get("id", index), index)
            self.by_launch.setdefault(kernel.get("launch", index), index)

    def indexes(self, finding: Mapping[str, Any]) -> list[int | None]:
        """The kernel sections a finding names.

        By the unique ``launch_ids`` when given (ncu's ``id`` repeats across input files),
        else by ``kernel_ids``.
        """
        launch_ids = _list(finding.get("launch_ids"))
        if launch_ids:
            return [self.by_launch.get(i) for i in launch_ids]
        return [self.by_id.get(i) for i in _list(finding.get("kernel_ids"))]

    @staticmethod
    def anchor(index: int) -> str:
        """Return the HTML id of the index-th kernel section."""
        return f"k-{index}"

    def for_kernel(self, item: Mapping[str, Any]) -> str | None:
        """Return the anchor of the kernel an entry names (by ``launch``, else by ``id``)."""
        index = (self.by_launch.get(item["launch"]) if item.get("launch") is not None
                 else self.by_id.get(item.get("id")))
        return None if index is None else self.anchor(index)


def _session_value(key: str, value: Any) -> str | None:
    """Format a session fact by the unit its key names (``_hz``, ``_bytes``, ``_bits``)."""
    if isinstance(value, list | tuple):
        return ", ".join(filter(None, (_text(v) for v in value))) or None
    if _number(value) is None:
        return _text(value)
    if key.endswith("_hz"):
        return _scaled(float(value), [(1e9, "GHz"), (1e6, "MHz"), (1e3, "kHz"), (1.0, "Hz")])
    if key.endswith("_bytes"):
        return str(fmt_bytes(value))
    if key.endswith("_bits"):
        return f"{fmt_num(value)} bits"
    return str(fmt_num(value))


def _timestamp(value: Any) -> str | None:
    """Print an ISO timestamp as ``2026-11-29 19:40:00 UTC`` (other text unchanged)."""
    text = _text(value)
    if text is None:
        return None
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        return text
    if stamp.utcoffset() == dt.timedelta(0):
        return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
    return stamp.isoformat(sep=" ")


def _header(result: Mapping[str, Any]) -> Header:
    session = _map(result.get("session"))
    tool = _map(result.get("tool"))
    facts = []
    for key, label in SESSION_LABELS.items():
        text = _session_value(key, session.get(key))
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
    gpu = _text(session.get("gpu"))
    return Header(
        title=f"ncu-advise report \u2014 {gpu}" if gpu else "ncu-advise report",
        tool=" ".join(filter(None, [_text(tool.get("name")) or "ncu-advise",
                                    _text(tool.get("version"))])),
        generated_at=_timestamp(result.get("generated_at")),
        command=_text(result.get("command")),
        sources=[s for s in (_text(x) for x in _list(result.get("sources"))) if s],
        facts=facts,
        warnings=[w for w in (_text(x) for x in _list(result.get("warnings"))) if w],
    )


def _summary(result: Mapping[str, Any], kernels: list[Mapping[str, Any]],
             anchors: _Anchors) -> Summary:
    summary = _map(result.get("summary"))
    top_src = _list(summary.get("top_kernels"))
    if not top_src:
        # A result without a summary: list the kernels by their share of GPU time instead.
        top_src = sorted(kernels, key=lambda k: -(_number(k.get("time_share")) or 0.0))
        top_src = [{**k, "bound": _bound(k)} for k in top_src[:_TOP_KERNELS]]
    top = []
    for item in top_src[:_TOP_KERNELS]:
        item = _map(item)
        name = _text(item.get("name")) or _text(item.get("short_name")) or "?"
        bound = (_text(item.get("bound")) or "unknown").lower()
        top.append(KernelBar(label=_text(item.get("short_name")) or name, name=name,
                             anchor=anchors.for_kernel(item),
                             duration_ns=_number(item.get("duration_ns")),
                             share=_number(item.get("time_share")),
                             bound=bound if bound in BOUND_COLORS else "unknown"))
    shown = [b.share for b in top if b.share is not None]
    other = max(0.0, 1.0 - sum(shown)) if shown else None
    # The bound mix: kernel counts from the summary (or the kernels), GPU time from the kernels.
    counts = dict.fromkeys(BOUNDS, 0)
    shares: dict[str, float] = dict.fromkeys(BOUNDS, 0.0)
    for kernel in kernels:
        bound = _bound(kernel)
        bound = bound if bound in counts else "unknown"
        counts[bound] += 1
        shares[bound] += _number(kernel.get("time_share")) or 0.0
    given = _map(summary.get("bounds"))
    if given:
        counts = {b: int(_number(given.get(b)) or 0) for b in BOUNDS}
    have_shares = any(_number(k.get("time_share")) is not None for k in kernels)
    bounds = [BoundShare(b, counts[b], shares[b] if have_shares else None)
              for b in BOUNDS if counts[b] or shares[b]]
    total = _number(summary.get("total_duration_ns"))
    if total is None and kernels:
        durations = [(_number(k.get("duration_ns")), _number(k.get("invocations")) or 1.0)
                     for k in kernels]
        if all(d is not None for d, _ in durations):
            total = sum(d * n for d, n in durations)
    launch_count = _number(summary.get("launch_count"))
    kernel_count = _number(summary.get("kernel_count"))
    return Summary(
        launch_count=int(launch_count) if launch_count is not None else len(kernels),
        kernel_count=int(kernel_count) if kernel_count is not None else None,
        total_duration_ns=total,
        top=top,
        other_share=other if other is not None and other > 0.0005 else None,
        bounds=bounds,
    )


def _finding(item: Mapping[str, Any], rank: int, links: list[KernelLink]) -> FindingRow:
    severity, order = _severity(item.get("severity"))
    launches = _number(item.get("launches"))
    return FindingRow(
        rank=rank,
        severity=severity,
        severity_order=order,
        confidence=_text(item.get("confidence")),
        category=_text(item.get("category")),
        rule=_text(item.get("rule")),
        title=_text(item.get("title")) or _text(item.get("rule")) or "finding",
        kernels=links,
        launches=int(launches) if launches is not None else None,
        saving_ns=_number(item.get("estimated_saving_ns")),
        app_saving_pct=_number(item.get("app_saving_pct")),
        speedup_pct=_number(item.get("estimated_speedup_pct")),
        advice=_text(item.get("advice")),
        demo=_text(item.get("demo")),
        evidence_source=_text(item.get("evidence_source")),
        note=_text(item.get("note")),
        evidence=_evidence(item.get("evidence")),
        source_lines=source_line_rows(item),
        source_cause=_text(item.get("source_cause")),
        collect_with=_text(item.get("collect_with")),
    )


def _kernel_links(indexes: list[int | None], kernels: list[Mapping[str, Any]],
                  anchors: _Anchors) -> list[KernelLink]:
    """Link a finding's kernels, one entry per short name with its launches listed."""
    links: dict[str, KernelLink] = {}
    for index in indexes:
        if index is None:
            continue
        label = (_text(kernels[index].get("short_name")) or _text(kernels[index].get("name"))
                 or f"kernel {index}")
        anchor = anchors.anchor(index)
        link = links.setdefault(label, KernelLink(label, anchor))
        link.launches.append((f"#{index}", anchor))
    for link in links.values():
        if len(link.launches) < 2:
            link.launches = []
    return list(links.values())


def _app_findings(result: Mapping[str, Any], kernels: list[Mapping[str, Any]],
                  anchors: _Anchors) -> list[FindingRow]:
    rows = []
    for rank, item in enumerate(_list(result.get("findings")), start=1):
        item = _map(item)
        indexes = anchors.indexes(item)
        links = _kernel_links(indexes, kernels, anchors)
        if not links:
            # No kernel ids: an application-level finding; show the kernel text it gives.
            links = [KernelLink(_text(item.get("kernel")) or "application", None)]
        row = _finding(item, rank, links)
        if not row.evidence:
            # The ranked list may omit evidence: show the one of its first kernel's finding.
            for index in indexes:
                if index is None:
                    continue
                for own in _list(kernels[index].get("findings")):
                    if _map(own).get("rule") == item.get("rule"):
                        row.evidence = _evidence(_map(own).get("evidence"))
                        break
                break
        rows.append(row)
    return rows


def _roofline(value: Any) -> RooflineView | None:
    roof = _map(value)
    if not roof:
        return None
    levels = [LevelRow(level=str(name), bytes=_number(_map(v).get("bytes")),
                       intensity=_number(_map(v).get("intensity")),
                       bandwidth=_number(_map(v).get("bandwidth")),
                       peak_bandwidth=_number(_map(v).get("peak_bandwidth")))
              for name, v in _map(roof.get("levels")).items()]
    flops, peaks = _map(roof.get("flops")), _map(roof.get("peaks"))
    precisions = [PrecisionRow(str(p), _number(flops.get(p)), _number(peaks.get(p)))
                  for p in dict.fromkeys([*flops, *peaks])
                  if _number(flops.get(p)) is not None or _number(peaks.get(p)) is not None]
    bound = (_text(roof.get("bound")) or "unknown").lower()
    return RooflineView(
        bound=bound if bound in BOUND_COLORS else "unknown",
        precision=_text(roof.get("precision")),
        intensity=_number(roof.get("arithmetic_intensity")),
        ridge_point=_number(roof.get("ridge_point")),
        achieved_flops=_number(roof.get("achieved_flops")),
        peak_flops=_number(roof.get("peak_flops")),
        achieved_bandwidth=_number(roof.get("achieved_bandwidth")),
        peak_bandwidth=_number(roof.get("peak_bandwidth")),
        pct_of_roof=_number(roof.get("pct_of_roof")),
        evidence=_text(roof.get("evidence")),
        levels=levels,
        precisions=precisions,
    )


def _unit_of_key(key: Any) -> str | None:
    """Guess a unit from a key's name, for the contract's plain-number extras."""
    key = str(key)
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


def _occupancy(value: Any, shape: Any = None) -> OccupancyView | None:
    occ = _map(value)
    if not occ:
        return None
    limiter = _text(occ.get("limiter"))
    limits = [LimitRow(name=str(k), label=LIMIT_LABELS.get(str(k), str(k).replace("_", " ")),
                       blocks=v, is_limiter=str(k) == limiter)
              for k, v in _map(occ.get("limits")).items()]
    known = {"theoretical_pct", "achieved_pct", "limiter", "limits", "waves_per_sm"}
    extra = []
    for key, item in occ.items():
        if key in known or isinstance(item, list | tuple):
            continue
        if isinstance(item, Mapping):
            extra.append(Quantity(str(key), _text(item.get("label")) or str(key),
                                  item.get("value"), _text(item.get("unit"))))
        else:
            label = OCCUPANCY_LABELS.get(str(key)) or str(key).replace("_", " ").capitalize()
            extra.append(Quantity(str(key), label, item, _unit_of_key(key)))
    for key, (label, unit) in SHAPE_LABELS.items():
        item = _number(_map(shape).get(key))
        if item is not None:
            extra.append(Quantity(key, label, item * 100 if key == "partial_wave_fill" else item,
                                  unit))
    return OccupancyView(
        theoretical_pct=_number(occ.get("theoretical_pct")),
        achieved_pct=_number(occ.get("achieved_pct")),
        limiter=limiter,
        waves_per_sm=_number(occ.get("waves_per_sm")),
        limits=limits,
        extra=extra,
    )


def _not_evaluated(value: Any) -> list[NotEvaluatedRow]:
    """Turn a contract ``not_evaluated`` list into rows."""
    return [NotEvaluatedRow(rule=_text(_map(n).get("rule")) or "?",
                            category=_text(_map(n).get("category")),
                            missing=[str(m) for m in _list(_map(n).get("missing"))],
                            collect_with=_text(_map(n).get("collect_with")))
            for n in _list(value)]


def _kernel(index: int, kernel: Mapping[str, Any]) -> KernelSection:
    name = _text(kernel.get("name")) or _text(kernel.get("short_name")) or f"kernel {index}"
    facts = []
    for key, label in (("id", "ncu ID"), ("stream", "Stream"), ("nvtx", "NVTX range"),
                       ("device", "Device"), ("cc", "CC")):
        text = _text(kernel.get(key))
        if text:
            facts.append(Fact(label, text))
    quantities = []
    for key, item in _map(kernel.get("quantities")).items():
        if isinstance(item, Mapping):
            quantities.append(Quantity(str(key), _text(item.get("label")) or str(key),
                                       item.get("value"), _text(item.get("unit"))))
        else:
            quantities.append(Quantity(str(key), str(key), item, None))
    findings = [_finding(_map(f), rank, [])
                for rank, f in enumerate(_list(kernel.get("findings")), start=1)]
    not_evaluated = _not_evaluated(kernel.get("not_evaluated"))
    ncu_rules = [
        NcuRuleRow(rule=_text(_map(r).get("rule")) or "?", section=_text(_map(r).get("section")),
                   type=_text(_map(r).get("type")), title=_text(_map(r).get("title")),
                   description=_text(_map(r).get("description")),
                   speedup_type=_text(_map(r).get("speedup_type")),
                   speedup=_number(_map(r).get("speedup")))
        for r in _list(kernel.get("ncu_rules"))]
    # ncu repeats some rules with no type or text (a second table row); they say nothing.
    ncu_rules = [r for r in ncu_rules if r.type or r.title or r.description]
    metrics = None
    if isinstance(kernel.get("metrics"), list):
        metrics = [MetricRow(metric=_text(_map(m).get("metric")) or "?",
                             section=_text(_map(m).get("section")),
                             label=_text(_map(m).get("label")),
                             unit=_text(_map(m).get("unit")),
                             value=_map(m).get("value") if _number(_map(m).get("value")) is not None
                             else _text(_map(m).get("text")))
                   for m in kernel["metrics"]]
    return KernelSection(
        anchor=_Anchors.anchor(index),
        index=index,
        id=kernel.get("id", index),
        name=name,
        short_name=_text(kernel.get("short_name")) or name,
        origin_label=_text(kernel.get("origin_label")),
        source=_text(kernel.get("source")),
        grid=kernel.get("grid"),
        block=kernel.get("block"),
        facts=facts,
        invocations=kernel.get("invocations"),
        duration_ns=_number(kernel.get("duration_ns")),
        time_share=_number(kernel.get("time_share")),
        bound=_bound(kernel) if _bound(kernel) in BOUND_COLORS else "unknown",
        quantities=quantities,
        roofline=_roofline(kernel.get("roofline")),
        occupancy=_occupancy(kernel.get("occupancy"), kernel.get("launch_shape")),
        findings=findings,
        not_evaluated=not_evaluated,
        ncu_rules=ncu_rules,
        metrics=metrics,
        metrics_labelled=any(m.label or m.section for m in metrics or []),
        metrics_print=len(metrics or []) <= PRINT_METRICS_MAX,
        top_severity=min(findings, key=lambda f: f.severity_order).severity if findings else None,
    )


def build_page(result: Mapping[str, Any], group_by: str | None = None) -> Page:
    """Build the report's view-model from the JSON-contract dictionary.

    Args:
        result: the dictionary ``ncu-advise analyze --format json`` prints.
        group_by: group the application's findings by ``kernel``, ``nvtx`` or ``origin``.

    Returns:
        The :class:`Page` the templates render.

    """
    kernels = [_map(k) for k in _list(result.get("kernels"))]
    anchors = _Anchors(kernels)
    svg = roofline_svg(result)
    findings = _app_findings(result, kernels, anchors)
    roofed = [k for k in kernels if _map(k.get("roofline"))]
    plotted = sum(1 for k in roofed
                  if (_number(_map(k["roofline"]).get("arithmetic_intensity")) or 0) > 0
                  and (_number(_map(k["roofline"]).get("achieved_flops")) or 0) > 0)
    return Page(
        header=_header(result),
        summary=_summary(result, kernels, anchors),
        # The chart is drawn by our code and escapes its own text: the one trusted markup.
        roofline_svg=Markup(svg) if svg else None,
        roofline_unplotted=len(roofed) - plotted if svg else 0,
        findings=findings,
        app_not_evaluated=_not_evaluated(_map(result.get("summary")).get("application_not_evaluated")),
        kernels=[_kernel(i, k) for i, k in enumerate(kernels)],
        severities=list(SEVERITIES),
        severity_counts=[(sev, n) for sev in SEVERITIES
                         if (n := sum(1 for f in findings if f.severity == sev))],
        validity=validity_rows(result),
        regions=region_rows(result),
        finding_groups=group_findings(
            findings, [_map(i) for i in _list(result.get("findings"))], kernels,
            [anchors.indexes(_map(i)) for i in _list(result.get("findings"))], group_by),
        group_by=group_by,
    )


def environment() -> Environment:
    """Return the jinja2 environment of the report templates, with the format filters."""
    env = Environment(loader=PackageLoader("ncu_advisor", "render/templates"),
                      autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(FILTERS)
    env.globals["not_measured"] = NOT_MEASURED
    return env


def render_html(result: Mapping[str, Any], group_by: str | None = None) -> str:
    """Render the self-contained HTML report of one analysis result.

    Args:
        result: the JSON-contract dictionary (what ``ncu-advise analyze --format json`` prints).
        group_by: group the findings list by ``kernel``, ``nvtx`` or ``origin`` (default:
            one list ranked by saving).

    Returns:
        The HTML page as a string; it loads nothing from the network.

    """
    page = build_page(result, group_by)
    return environment().get_template("report.html.j2").render(page=page)
