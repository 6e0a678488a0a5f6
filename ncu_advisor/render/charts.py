"""Charts for the HTML report, drawn with matplotlib into inline SVG strings.

The SVG is the only markup the report trusts, so everything that comes from the input (kernel
names) is escaped here: matplotlib escapes ``<text>`` content and comments, and the tooltips we
add afterwards go through :func:`html.escape`.  The output is deterministic (no date, no
creator, a fixed hash salt for element ids) so gold tests can compare it.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import matplotlib
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .formats import as_number

# Colours shared with the page's CSS (report.css: --memory, --compute, --latency, --unknown).
BOUND_COLORS: dict[str, str] = {
    "memory": "#2f6db5",
    "compute": "#c2571a",
    "latency": "#7a4fa8",
    "unknown": "#8a8f98",
}
# Compute roofs, drawn in this order; the label names the precision as ncu's roofline does.
PRECISIONS: dict[str, str] = {
    "fp64": "FP64",
    "fp32": "FP32",
    "fp16": "FP16",
    "tensor": "Tensor",
}
# Memory roofs, outermost first: L1 has the highest bandwidth, DRAM the lowest.
LEVELS: dict[str, str] = {"l1": "L1", "l2": "L2", "dram": "DRAM"}
ROOF_STYLE = {"dram": "-", "l2": "--", "l1": ":"}
# Beyond this many kernels only the largest (by time share) carry a text label; every point
# still has a tooltip with its full name.
MAX_LABELS = 16
CHART_STYLE = {
    "svg.fonttype": "none",  # keep text as <text>: small, selectable, no embedded glyphs
    "svg.hashsalt": "ncu-advise",  # deterministic clip-path / marker ids
    "font.family": "sans-serif",
    "font.size": 8.5,
    "axes.edgecolor": "#9aa0a6",
    "axes.linewidth": 0.8,
    "xtick.color": "#5f6368",
    "ytick.color": "#5f6368",
    "axes.labelcolor": "#3c4043",
}
RC_PARAMS = CHART_STYLE
_SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"), (1.0, "")]


@dataclass
class RooflinePoint:
    """One kernel on the chart."""

    index: int
    label: str
    name: str
    intensity: float
    flops: float
    share: float
    bound: str


def positive_only(value: Any) -> float | None:
    """Return ``value`` as a finite positive float (log axes need it), or None."""
    value = as_number(value)
    return value if value is not None and value > 0 else None


def si_format(value: float, unit: str = "") -> str:
    """Format a tick value with an SI prefix: 1.5e12 -> '1.5 T'."""
    for factor, prefix in _SI:
        if abs(value) >= factor:
            text = f"{value / factor:.3g}"
            return f"{text} {prefix}{unit}".strip()
    return f"{value:.3g} {unit}".strip()


def _intensity_tick(value: float, _pos: int | None = None) -> str:
    """Format an arithmetic-intensity tick (FLOP/byte) without scientific notation."""
    if value >= 1:
        return f"{value:,.0f}"
    return f"{value:.{max(0, -math.floor(math.log10(value)))}f}"


def _kernel_points(kernels: Iterable[Mapping[str, Any]]) -> tuple[list[RooflinePoint], int]:
    """Collect the kernels that can be placed on log-log axes.

    Returns:
        The plottable points and how many kernels had roofline data but no floating-point
        work (zero FLOP/s or zero intensity cannot be drawn on a log scale).

    """
    points: list[RooflinePoint] = []
    unplottable = 0
    for index, kernel in enumerate(kernels):
        roof = kernel.get("roofline")
        if not isinstance(roof, Mapping):
            continue
        intensity = positive_only(roof.get("arithmetic_intensity"))
        flops = positive_only(roof.get("achieved_flops"))
        if intensity is None or flops is None:
            unplottable += 1
            continue
        bound = str(roof.get("bound") or "unknown")
        points.append(RooflinePoint(
            index=index,
            label=str(kernel.get("short_name") or kernel.get("name") or f"kernel {index}"),
            name=str(kernel.get("name") or kernel.get("short_name") or f"kernel {index}"),
            intensity=intensity,
            flops=flops,
            share=as_number(kernel.get("time_share")) or 0.0,
            bound=bound if bound in BOUND_COLORS else "unknown",
        ))
    return points, unplottable


def _device_roofs(
    kernels: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, float], dict[str, float]]:
    """Return the compute peaks (precision -> FLOP/s) and memory peaks (level -> byte/s).

    The device's peaks are the same for every kernel of one GPU; the largest value seen wins, so a
    kernel whose report lacks one peak does not hide the roof.
    """
    compute: dict[str, float] = {}
    memory: dict[str, float] = {}
    for kernel in kernels:
        roof = kernel.get("roofline")
        if not isinstance(roof, Mapping):
            continue
        peaks = roof.get("peaks")
        if isinstance(peaks, Mapping):
            for precision in PRECISIONS:
                peak = positive_only(peaks.get(precision))
                if peak is not None:
                    compute[precision] = max(compute.get(precision, 0.0), peak)
        precision = str(roof.get("precision") or "fp32")
        peak = positive_only(roof.get("peak_flops"))
        if peak is not None and precision in PRECISIONS and precision not in compute:
            compute[precision] = peak
        levels = roof.get("levels")
        if isinstance(levels, Mapping):
            for level in LEVELS:
                entry = levels.get(level)
                if isinstance(entry, Mapping):
                    bw = positive_only(entry.get("peak_bandwidth"))
                    if bw is not None:
                        memory[level] = max(memory.get(level, 0.0), bw)
        bw = positive_only(roof.get("peak_bandwidth"))
        if bw is not None:
            memory["dram"] = max(memory.get("dram", 0.0), bw)
    return compute, memory


def inline_svg(fig: Any, title_id: str, title: str,
               tips: Mapping[str, tuple[str, str]]) -> str:
    """Save a matplotlib figure as an inline ``<svg>`` fragment for an HTML page.

    Args:
        fig: the figure (call inside the ``rc_context`` it was drawn in).
        title_id: the id of the chart's ``<title>`` (``aria-labelledby``).
        title: what the chart shows, for screen readers and as its tooltip.
        tips: per plotted group (its ``gid``): extra attributes for the ``<g>`` and its
            tooltip text (escaped here).

    """
    buf = io.StringIO()
    fig.savefig(buf, format="svg",
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # Comments hold mathtext sources; the global "*" style would leak into the page.
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.DOTALL)
    svg = re.sub(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>", "", svg, flags=re.DOTALL)
    # Let the page choose the font (matplotlib writes its long fallback list on every text).
    svg = re.sub(r"font-family: [^;\"]*;?\s*", "", svg)
    svg = svg.replace("<svg ", f'<svg class="roofline" role="img" aria-labelledby="{title_id}" ',
                      1)
    svg = re.sub(r'\s(width|height)="[\d.]+pt"', "", svg, count=2)
    svg = svg.replace(">", f'><title id="{title_id}">{html.escape(title)}</title>', 1)
    for gid, (attributes, tip) in tips.items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"{attributes}>'
                          f"<title>{html.escape(tip, quote=True)}</title>", 1)
    # Trim trailing spaces matplotlib leaves on path data lines; keeps the file small.
    return re.sub(r"[ \t]+\n", "\n", svg).strip() + "\n"


def _point_tips(points: list[RooflinePoint]) -> dict[str, tuple[str, str]]:
    """Each kernel point's tooltip, and the attributes the page's script finds it by."""
    return {f"rl-pt-{p.index}": (
        f' class="rl-pt" data-kernel="{p.index}"',
        f"{p.name}\n{si_format(p.flops, 'FLOP/s')} at {p.intensity:.3g} FLOP/byte, "
        f"{p.share * 100:.1f}% of GPU time, {p.bound} bound") for p in points}


def roofline_axes(xs: list[float], ys: list[float], compute: Mapping[str, float],
                  memory: Mapping[str, float]) -> tuple[Any, Any, tuple[float, ...]]:
    """A log-log roofline figure whose axes cover every point and ridge in whole decades.

    Call inside ``matplotlib.rc_context(RC_PARAMS)``. Returns the figure, its axes and the limits
    (x_lo, x_hi, y_lo, y_hi); the roofs and points are the caller's.
    """
    top = max([*compute.values(), *ys, 1.0])
    ridges = [peak / bw for peak in compute.values() for bw in memory.values()]
    x_lo = 10 ** math.floor(math.log10(min([*xs, *ridges, 1.0]) / 2))
    x_hi = 10 ** math.ceil(math.log10(max([*xs, *ridges, 1.0]) * 2))
    y_lo = 10 ** math.floor(math.log10(min([*ys, top / 1e4]) / 2))
    y_hi = 10 ** math.ceil(math.log10(top * 1.5))
    fig = Figure(figsize=(7.6, 4.3))
    FigureCanvasSVG(fig)
    # Fixed margins (not constrained layout) so the roof labels' angle can be computed.
    fig.subplots_adjust(left=0.15, right=0.96, bottom=0.11, top=0.97)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.grid(True, which="major", color="#e8eaed", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.yaxis.set_major_locator(LogLocator(base=10))
    # Minor ticks at 2 and 5 of each decade (1-2-5): every tick is a matplotlib object, and
    # the eight per decade took 60% of the chart's time.
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(_intensity_tick))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: si_format(v, "FLOP/s")))
    ax.set_xlabel("Arithmetic intensity (FLOP/byte, DRAM)")
    ax.set_ylabel("Achieved performance")
    return fig, ax, (x_lo, x_hi, y_lo, y_hi)


def draw_compute_roofs(ax: Any, compute: Mapping[str, float], memory: Mapping[str, float],
                       x_lo: float, x_hi: float, linewidth: float) -> None:
    """Compute roofs: flat from the outermost memory roof's ridge to the right edge, labelled."""
    bw_max = max(memory.values()) if memory else None
    for precision, label in PRECISIONS.items():
        peak = compute.get(precision)
        if peak is None:
            continue
        x_start = max(peak / bw_max, x_lo) if bw_max else x_lo
        ax.plot([x_start, x_hi], [peak, peak], "-", color="#3c4043", linewidth=linewidth)
        ax.annotate(f"{label} {si_format(peak, 'FLOP/s')}", (x_hi, peak), fontsize=7.5,
                    color="#3c4043", ha="right", va="bottom", xytext=(-2, 2),
                    textcoords="offset points", parse_math=False)


def roofline_svg(result: Mapping[str, Any], only: set[int] | None = None) -> str | None:
    """Draw the application's roofline as an inline SVG string.

    Log-log axes, arithmetic intensity (FLOP/byte, DRAM) against achieved FLOP/s: one roof per
    memory level and per precision the input gives a peak for, and one point per kernel, sized
    by its share of GPU time and coloured by its bound.

    Args:
        result: the JSON-contract dictionary (``ncu-advise analyze --format json``).
        only: the indexes of the kernels to plot (None: all); a big run's page plots the
            kernels it has a section for.

    Returns:
        An ``<svg>`` element without XML prolog, or None when no kernel has roofline data.

    """
    kernels = [k for k in (result.get("kernels") or []) if isinstance(k, Mapping)]
    if not any(isinstance(k.get("roofline"), Mapping) for k in kernels):
        return None
    points, _ = _kernel_points(kernels)
    if only is not None:
        points = [p for p in points if p.index in only]
    compute, memory = _device_roofs(kernels)
    if not points and not (compute and memory):
        return None

    with matplotlib.rc_context(RC_PARAMS):
        fig, ax, (x_lo, x_hi, y_lo, y_hi) = roofline_axes(
            [p.intensity for p in points], [p.flops for p in points], compute, memory)

        # Memory roofs: a diagonal up to the highest compute peak (or the plot top).
        obstacles: list[tuple[float, float, float, float]] = []
        ceiling = max(compute.values()) if compute else y_hi
        for stagger, (level, label) in enumerate(reversed(LEVELS.items())):
            bw = memory.get(level)
            if bw is None:
                continue
            x_end = min(ceiling / bw, x_hi)
            ax.plot([x_lo, x_end], [bw * x_lo, bw * x_end], ROOF_STYLE[level],
                    color="#5f6368", linewidth=1.1)
            # Label each memory roof near the left edge, where it is inside the plot; the
            # labels of neighbouring roofs are staggered so they do not overlap.
            x_text = max(x_lo * 1.5, y_lo * 4 / bw) * 3.5 ** stagger
            text = f"{label} {si_format(bw, 'B/s')}"
            angle = _diagonal_angle(ax)
            ax.annotate(text, (x_text, bw * x_text), fontsize=7.5, color="#5f6368",
                        rotation_mode="anchor", xytext=(2, 4), textcoords="offset points",
                        rotation=angle, parse_math=False)
            obstacles.extend(_rotated_text_boxes(ax, (x_text, bw * x_text), text, angle))
        draw_compute_roofs(ax, compute, memory, x_lo, x_hi, linewidth=1.1)

        # Kernels: area grows with time share; the biggest are drawn first so small ones stay
        # visible on top.
        ordered = sorted(points, key=lambda p: -p.share)
        for point in ordered:
            ax.plot([point.intensity], [point.flops], "o", markersize=_marker_size(point),
                    color=BOUND_COLORS[point.bound], alpha=0.85, markeredgecolor="white",
                    markeredgewidth=0.8, gid=f"rl-pt-{point.index}")
        label_points(ax, ordered, ordered[:MAX_LABELS], obstacles)
        for bound, color in BOUND_COLORS.items():
            if any(p.bound == bound for p in points):
                ax.plot([], [], "o", color=color, markersize=6, label=f"{bound} bound")
        if points:
            ax.legend(loc="lower right", frameon=False, fontsize=7.5, handletextpad=0.2)

        return inline_svg(fig, "rl-title", "Roofline: achieved FLOP/s against arithmetic "
                          "intensity for each kernel", _point_tips(points))


def _marker_size(point: RooflinePoint) -> float:
    """Return the marker diameter in points: the area grows with the kernel's time share."""
    return 5 + 17 * math.sqrt(max(point.share, 0.0))


def _rotated_text_boxes(ax: Any, xy: tuple[float, float], text: str,
                        angle: float) -> list[tuple[float, float, float, float]]:
    """Approximate a rotated roof label by small boxes along it (display coordinates)."""
    scale = ax.figure.dpi / 72.0
    x0, y0 = ax.transData.transform(xy)
    x0, y0 = x0 + 2 * scale, y0 + 4 * scale
    cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    boxes = []
    for step in range(0, int(len(text) * 4.4) + 1, 4):
        # The middle of the text line: along the baseline, then half a line up.
        cx = x0 + (step * cos - 4 * sin) * scale
        cy = y0 + (step * sin + 4 * cos) * scale
        boxes.append((cx - 4 * scale, cy - 4 * scale, cx + 4 * scale, cy + 4 * scale))
    return boxes


def label_points(ax: Any, points: list[RooflinePoint], labelled: list[RooflinePoint],
                  obstacles: list[tuple[float, float, float, float]],
                  ) -> list[tuple[float, float, float, float]]:
    """Label points with their short names, avoiding points, roof labels and other labels.

    A greedy placement in display space: each label tries six spots around its point and
    takes the first that covers nothing already placed and stays inside the axes; when none
    does, the point keeps no label (its tooltip names it) rather than one drawn over another
    or cut at the edge. A name already shown nearby (repeated launches of one kernel) is not
    repeated.

    Returns:
        The label boxes placed, in display coordinates.

    """
    dpi_scale = ax.figure.dpi / 72.0
    frame = ax.bbox

    def inside(box: tuple[float, float, float, float]) -> bool:
        return (box[0] >= frame.x0 and box[2] <= frame.x1 and box[1] >= frame.y0
                and box[3] <= frame.y1)

    labels: list[tuple[float, float, float, float]] = []
    placed: list[tuple[float, float, float, float]] = list(obstacles)
    for point in points:
        x, y = ax.transData.transform((point.intensity, point.flops))
        r = _marker_size(point) / 2 * dpi_scale
        placed.append((x - r, y - r, x + r, y + r))
    shown: list[tuple[str, float, float]] = []
    for point in labelled:
        text = _short(point.label)
        x, y = ax.transData.transform((point.intensity, point.flops))
        if any(t == text and math.hypot(x - sx, y - sy) < 12 * dpi_scale for t, sx, sy in shown):
            continue
        r = _marker_size(point) / 2 + 2
        width, height = (len(text) * 4.4 + 2) * dpi_scale, 9 * dpi_scale
        candidates = []
        for dx, dy, ha, va in ((r, 1, "left", "bottom"), (r, -1, "left", "top"),
                               (-r, 1, "right", "bottom"), (-r, -1, "right", "top"),
                               (0, r, "center", "bottom"), (0, -r, "center", "top")):
            x0 = x + dx * dpi_scale - {"left": 0, "center": width / 2, "right": width}[ha]
            y0 = y + dy * dpi_scale - (height if va == "top" else 0)
            candidates.append(((x0, y0, x0 + width, y0 + height), dx, dy, ha, va))
        free = next(
            (c for c in candidates
             if inside(c[0]) and not any(c[0][0] < b[2] and b[0] < c[0][2]
                                         and c[0][1] < b[3] and b[1] < c[0][3] for b in placed)),
            None)
        if free is None:
            continue
        box, dx, dy, ha, va = free
        placed.append(box)
        labels.append(box)
        shown.append((text, x, y))
        ax.annotate(text, (point.intensity, point.flops), xytext=(dx, dy),
                    textcoords="offset points", ha=ha, va=va, fontsize=7.5, color="#202124",
                    parse_math=False)
    return labels


def _diagonal_angle(ax: Any) -> float:
    """Return the on-screen angle of a slope-1 line on the log-log axes, in degrees."""
    x0, x1 = (math.log10(v) for v in ax.get_xlim())
    y0, y1 = (math.log10(v) for v in ax.get_ylim())
    width, height = ax.figure.get_size_inches()
    pos = ax.get_position()
    dx = width * pos.width / (x1 - x0)
    dy = height * pos.height / (y1 - y0)
    return math.degrees(math.atan2(dy, dx))


def _short(label: str, limit: int = 28) -> str:
    """Shorten a long label for the chart; the tooltip keeps the full name."""
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"
