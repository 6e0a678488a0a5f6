"""The self-contained HTML page of a diff (``ncu-advise diff --format html``).

Same rules as the analysis report (:mod:`ncu_advisor.render.html`): a view-model of plain
dataclasses built from the diff's JSON form, templates that only loop and format, autoescaping
for everything from the input, the report's CSS, JS and format filters, and charts drawn by our
own code (the per-kernel time chart as SVG in the template, the roofline with matplotlib).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from .._version import __version__
from .charts import (
    LEVELS,
    MAX_LABELS,
    RC_PARAMS,
    ROOF_STYLE,
    RooflinePoint,
    draw_compute_roofs,
    inline_svg,
    label_points,
    positive_only,
    roofline_axes,
    si_format,
)
from .formats import as_number
from .html import environment

# Bars in the per-kernel time chart (the largest pairs by time, before or after).
TIME_CHART_PAIRS = 12
BEFORE_COLOR = "#9aa0a6"
AFTER_COLOR = "#1f5fa8"


@dataclass
class PairRow:
    """One row of the pairs table (and of the time chart)."""

    before_name: str | None
    after_name: str | None
    before_id: int | None
    after_id: int | None
    match: str
    verdict: str
    before_ns: float | None
    after_ns: float | None
    delta_ns: float | None
    speedup: float | None
    change_pct: float | None
    noise_ns: float | None
    bound_before: str | None
    bound_after: str | None
    quantities: list[tuple[str, str, Any, Any, float | None]]  # label, unit, before, after, %

    @property
    def renamed(self) -> bool:
        """Whether the two sides have different kernel names."""
        return bool(self.before_name and self.after_name and self.before_name != self.after_name)


@dataclass
class TimeBar:
    """One pair in the per-kernel time chart (widths in percent of the largest time)."""

    label: str
    title: str
    before_width: float
    after_width: float
    before_ns: float | None
    after_ns: float | None
    y: int


@dataclass
class FindingItem:
    """A finding resolved, new or kept."""

    status: str
    rule: str
    category: str
    severity: str
    title: str
    kernel: str
    launches: int
    worsened: bool
    before_severity: str | None
    after_severity: str | None


@dataclass
class DiffHeader:
    """What the base template needs: the page title and the tool that made it."""

    title: str
    tool: str


@dataclass
class DiffPage:
    """Everything the diff template shows."""

    header: DiffHeader
    before_sources: list[str]
    after_sources: list[str]
    gpu: str | None
    before_ns: float | None
    after_ns: float | None
    speedup: float | None
    change_pct: float | None
    within_noise: bool | None
    noise: Mapping[str, Any]
    match_counts: list[tuple[str, int]]
    pairs: list[PairRow]
    bars: list[TimeBar]
    chart_height: int
    roofline_svg: Markup | None
    findings: dict[str, list[FindingItem]]
    gates: list[Mapping[str, Any]]


def _short(name: str | None, limit: int = 48) -> str:
    if not name:
        return ""
    return name if len(name) <= limit else name[: limit - 1] + "\u2026"


def _pair_row(row: Mapping[str, Any]) -> PairRow:
    b, a = row.get("before"), row.get("after")
    qs = [(q["label"], q["unit"], q["before"], q["after"], q.get("change_pct"))
          for q in (row.get("quantities") or {}).values()]
    return PairRow(
        before_name=b["short_name"] if b else None, after_name=a["short_name"] if a else None,
        before_id=b["id"] if b else None, after_id=a["id"] if a else None,
        match=row["match"], verdict=row["verdict"], before_ns=row["before_ns"],
        after_ns=row["after_ns"], delta_ns=row["delta_ns"], speedup=row["speedup"],
        change_pct=row["change_pct"], noise_ns=row["noise_ns"],
        bound_before=(row.get("bound") or {}).get("before"),
        bound_after=(row.get("bound") or {}).get("after"), quantities=qs)


def _bars(rows: list[PairRow]) -> list[TimeBar]:
    biggest = sorted(rows, key=lambda r: -max(r.before_ns or 0.0, r.after_ns or 0.0))
    biggest = biggest[:TIME_CHART_PAIRS]
    top = max([max(r.before_ns or 0.0, r.after_ns or 0.0) for r in biggest] + [1.0])
    bars = []
    for i, r in enumerate(biggest):
        label = r.after_name or r.before_name or "?"
        title = (f"{r.before_name} -> {r.after_name}" if r.renamed else label)
        bars.append(TimeBar(label=_short(label, 40), title=title,
                            before_width=100.0 * (r.before_ns or 0.0) / top,
                            after_width=100.0 * (r.after_ns or 0.0) / top,
                            before_ns=r.before_ns, after_ns=r.after_ns, y=i * 34))
    return bars


def _findings(data: Mapping[str, Any]) -> dict[str, list[FindingItem]]:
    out = {}
    for status in ("resolved", "new", "kept"):
        out[status] = [FindingItem(
            status=status, rule=f["rule"], category=f["category"], severity=f["severity"],
            title=f["title"], kernel=f["kernel"], launches=f["launches"],
            worsened=bool(f.get("worsened")), before_severity=f.get("before_severity"),
            after_severity=f.get("after_severity"))
            for f in (data.get("findings") or {}).get(status, [])]
    return out


def roofline_diff_svg(data: Mapping[str, Any]) -> str | None:
    """Draw both runs on one roofline: before points grey, after points blue, an arrow per pair.

    Args:
        data: the diff's JSON form (``pairs`` with ``roofline`` points, ``roofs``).

    Returns:
        An inline ``<svg>`` string, or None when no pair can be placed on log axes.

    """
    import matplotlib

    points = []  # (side, x, y, name, pair index)
    for index, row in enumerate(data.get("pairs") or []):
        for side in ("before", "after"):
            pt = (row.get("roofline") or {}).get(side)
            ref = row.get(side)
            if not pt or not ref:
                continue
            x = positive_only(pt.get("arithmetic_intensity"))
            y = positive_only(pt.get("achieved_flops"))
            if x is not None and y is not None:
                points.append((side, x, y, str(ref.get("name") or ""), index,
                               str(ref.get("short_name") or ref.get("name") or "")))
    if not points:
        return None
    roofs = data.get("roofs") or {}
    compute = {k: v for k, v in (roofs.get("compute") or {}).items() if positive_only(v)}
    memory = {k: v for k, v in (roofs.get("memory") or {}).items() if positive_only(v)}
    with matplotlib.rc_context(RC_PARAMS):
        fig, ax, (x_lo, x_hi, y_lo, y_hi) = roofline_axes(
            [p[1] for p in points], [p[2] for p in points], compute, memory)
        ceiling = max(compute.values()) if compute else y_hi
        for level, label in LEVELS.items():
            bw = memory.get(level)
            if bw is None:
                continue
            x_end = min(ceiling / bw, x_hi)
            ax.plot([x_lo, x_end], [bw * x_lo, bw * x_end], ROOF_STYLE[level],
                    color="#5f6368", linewidth=1.0, label=f"{label} {si_format(bw, 'B/s')}")
        draw_compute_roofs(ax, compute, memory, x_lo, x_hi, linewidth=1.0)
        by_pair: dict[int, dict[str, tuple[float, float]]] = {}
        for side, x, y, _name, index, _short in points:
            by_pair.setdefault(index, {})[side] = (x, y)
        for ends in by_pair.values():
            if "before" in ends and "after" in ends and ends["before"] != ends["after"]:
                ax.annotate("", xy=ends["after"], xytext=ends["before"],
                            arrowprops={"arrowstyle": "->", "color": "#5f6368", "lw": 0.8,
                                        "shrinkA": 4, "shrinkB": 5})
        for n, (side, x, y, _name, _index, _short) in enumerate(points):
            before = side == "before"
            ax.plot([x], [y], "o", markersize=7, color="white" if before else AFTER_COLOR,
                    markeredgecolor=BEFORE_COLOR if before else "white",
                    markeredgewidth=1.4 if before else 0.8, gid=f"rd-pt-{n}")
        # Each pair named once, at its after point (its before one when it is gone), in the
        # pairs' order, placed like the analysis roofline's labels (never over another).
        marks = [RooflinePoint(n, short, name, x, y, 0.02, "unknown")
                 for n, (_side, x, y, name, _index, short) in enumerate(points)]
        named: dict[int, RooflinePoint] = {}
        for mark, (side, *_rest, index, _short) in zip(marks, points, strict=True):
            if side == "after" or index not in named:
                named[index] = mark
        label_points(ax, marks, list(named.values())[:MAX_LABELS], [])
        ax.plot([], [], "o", color="white", markeredgecolor=BEFORE_COLOR, label="before")
        ax.plot([], [], "o", color=AFTER_COLOR, markeredgecolor="white", label="after")
        ax.legend(loc="lower right", frameon=False, fontsize=7.5, handletextpad=0.3)
        tips = {f"rd-pt-{n}": ("", f"{side}: {name}\n{si_format(y, 'FLOP/s')} at {x:.3g} FLOP/byte")
                for n, (side, x, y, name, _index, _short) in enumerate(points)}
        return inline_svg(fig, "rd-title", "Both runs on one roofline: each kernel before "
                          "(hollow) and after (filled)", tips)


def build_diff_page(data: Mapping[str, Any]) -> DiffPage:
    """Build the diff page's view-model from the diff's JSON form."""
    rows = [_pair_row(r) for r in data.get("pairs") or []]
    rows.sort(key=lambda r: -abs(r.delta_ns or 0.0))
    bars = _bars(rows)
    svg = roofline_diff_svg(data)
    before, after = data["before"], data["after"]
    return DiffPage(
        header=DiffHeader(title="ncu-advise diff", tool=f"ncu-advise {__version__}"),
        before_sources=list(before.get("sources") or []),
        after_sources=list(after.get("sources") or []),
        gpu=after.get("gpu") or before.get("gpu"),
        before_ns=as_number(before.get("total_ns")), after_ns=as_number(after.get("total_ns")),
        speedup=as_number(data.get("speedup")), change_pct=as_number(data.get("change_pct")),
        within_noise=data.get("within_noise"), noise=data.get("noise") or {},
        match_counts=[(k, n) for k, n in (data.get("match_counts") or {}).items() if n],
        pairs=rows, bars=bars, chart_height=max(len(bars) * 34, 34),
        # Drawn by our code, which escapes its own text: the one trusted markup.
        roofline_svg=Markup(svg) if svg else None,
        findings=_findings(data), gates=list(data.get("gates") or []),
    )


def render_diff_html(data: Mapping[str, Any]) -> str:
    """Render the self-contained HTML page of a diff.

    Args:
        data: ``RunDiff.to_dict()`` (plus ``gates`` when gates were evaluated).

    Returns:
        The page; it loads nothing from the network.

    """
    env = environment()
    return env.get_template("diff.html.j2").render(page=build_diff_page(data))
