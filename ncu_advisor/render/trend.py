"""Render a trend (``ncu_advisor.store.trend``): a terminal table and a self-contained HTML chart.

The chart is an inline SVG drawn with matplotlib, as the report's roofline is; kernel names
and label values come from users, so matplotlib's own escaping of ``<text>`` is relied on
and math text is off (a ``$`` in a label must print as itself).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import matplotlib
import pandas as pd
from markupsafe import Markup
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from .charts import CHART_STYLE
from .formats import fmt_bytes, fmt_duration, fmt_pct, fmt_time, safe_text
from .html import environment

RC_PARAMS = {**CHART_STYLE, "text.parse_math": False}  # kernel names may hold $
# The quantities drawn under the time line, and their colours.
_PCT_LINES = {"dram_pct": ("DRAM %", "#2f6db5"), "sm_pct": ("SM %", "#c2571a"),
              "achieved_occupancy_pct": ("achieved occupancy %", "#7a4fa8")}


def _num(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _when(value: Any, seconds: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return "-"
    return pd.Timestamp(value).strftime("%Y-%m-%d %H:%M" + (":%S" if seconds else ""))


# The x axis says what orders the reports (the tick labels alone were read as unlabelled).
X_LABEL_BY_VALUE = "report, by the --order-by label's value"
X_LABEL_BY_TIME = "report, by when it was captured (else ingested)"


def _x_labels(frame: pd.DataFrame) -> list[str]:
    """What names each report on the x axis: the label value, else its time.

    Times are shown to the minute, or to the second when reports share a minute (one ingest
    of several reports).
    """
    if frame["label_value"].notna().any():
        return [str(v) for v in frame["label_value"].fillna("-")]
    minutes = [_when(v) for v in frame["report_time"]]
    if len(set(minutes)) == len(minutes):
        return minutes
    return [_when(v, seconds=True) for v in frame["report_time"]]


def describe(kernel: str | None, label: str | None, rows: int) -> str:
    """One line saying what the trend shows."""
    what = f"kernels matching /{kernel}/" if kernel else "the whole run (every kernel)"
    order = f"ordered by label {label}" if label else "ordered by capture (else ingest) time"
    return f"GPU time of {what} in {rows} report(s), {order}"


def render_trend_text(frame: pd.DataFrame, kernel: str | None = None,
                      label: str | None = None) -> str:
    """A fixed-width table, one report per line."""
    lines = [f"ncu-advise trend: {describe(kernel, label, len(frame))}"]
    if frame.empty:
        return lines[0] + "\n  (no report has a matching launch)\n"
    head = label or "captured/ingested"
    xs = _x_labels(frame)
    width = max(len(head), *(len(x) for x in xs))
    width = min(width, 24)
    lines.append(f"  {'report':<17}  {head:<{width}}  {'launches':>8}  {'time':>9}  "
                 f"{'change':>7}  {'DRAM%':>6}  {'SM%':>6}  {'occ%':>6}  findings")

    def pct(v: Any) -> str:
        n = _num(v)
        return "-" if n is None else f"{n:.1f}"

    for x, row in zip(xs, frame.itertuples(index=False), strict=True):
        change = _num(row.change_pct)
        lines.append(
            f"  {row.report_id:<17}  {x[:width]:<{width}}  {int(row.launches):>8}  "
            f"{fmt_time(_num(row.total_ns)):>9}  "
            f"{'-' if change is None else f'{change:+.1f}%':>7}  {pct(row.dram_pct):>6}  "
            f"{pct(row.sm_pct):>6}  {pct(row.achieved_occupancy_pct):>6}  {int(row.findings):>8}")
    return "\n".join(safe_text(line) for line in lines) + "\n"


def trend_svg(frame: pd.DataFrame, title: str) -> str:
    """The chart: GPU time per report on top, the time-weighted percentages below."""
    xs = list(range(len(frame)))
    labels = _x_labels(frame)
    with matplotlib.rc_context(RC_PARAMS):
        fig = Figure(figsize=(9.0, 5.2))
        FigureCanvasSVG(fig)
        top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        times = [(_num(v) or float("nan")) / 1e6 for v in frame["total_ns"]]
        top.plot(xs, times, marker="o", markersize=3.5, color="#202124", linewidth=1.4)
        top.set_ylabel("GPU time (ms)")
        top.set_ylim(bottom=0)
        top.set_title(title, fontsize=9, loc="left")
        top.grid(axis="y", color="#e8eaed", linewidth=0.6)
        for key, (name, colour) in _PCT_LINES.items():
            values = [(_num(v) if _num(v) is not None else float("nan")) for v in frame[key]]
            if any(not math.isnan(v) for v in values):
                bottom.plot(xs, values, marker=".", color=colour, linewidth=1.1, label=name)
        bottom.set_ylim(0, 105)
        bottom.set_ylabel("%")
        bottom.grid(axis="y", color="#e8eaed", linewidth=0.6)
        if bottom.lines:  # above the panel, so it never hides a point
            bottom.legend(loc="lower left", bbox_to_anchor=(0.0, 0.98), fontsize=7.5,
                          frameon=False, ncols=3, borderaxespad=0.0)
        bottom.xaxis.set_major_locator(MaxNLocator(nbins=min(len(xs), 12), integer=True))
        bottom.xaxis.set_major_formatter(FuncFormatter(
            lambda v, _pos: labels[int(v)][:20] if 0 <= int(v) < len(labels) else ""))
        for tick in bottom.get_xticklabels():
            tick.set_rotation(30)
            tick.set_horizontalalignment("right")
        bottom.set_xlabel(X_LABEL_BY_VALUE if frame["label_value"].notna().any()
                          else X_LABEL_BY_TIME, fontsize=8)
        fig.subplots_adjust(left=0.1, right=0.98, top=0.93, bottom=0.24, hspace=0.16)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


@dataclass
class TrendRow:
    """One report in the HTML table."""

    report_id: str
    x: str
    when: str
    launches: int
    time: str
    change: str
    dram: str
    sm: str
    occupancy: str
    dram_bytes: str
    findings: int


def render_trend_html(frame: pd.DataFrame, kernel: str | None = None,
                      label: str | None = None, store: str = "") -> str:
    """The self-contained HTML page: the chart (inline SVG) and the table; nothing remote."""
    title = describe(kernel, label, len(frame))
    xs = _x_labels(frame) if not frame.empty else []
    rows = []
    for x, row in zip(xs, frame.itertuples(index=False), strict=True):
        change = _num(row.change_pct)
        rows.append(TrendRow(
            report_id=row.report_id, x=x, when=_when(row.report_time),
            launches=int(row.launches), time=fmt_duration(_num(row.total_ns)),
            change="-" if change is None else f"{change:+.1f}%",
            dram=fmt_pct(_num(row.dram_pct)), sm=fmt_pct(_num(row.sm_pct)),
            occupancy=fmt_pct(_num(row.achieved_occupancy_pct)),
            dram_bytes=fmt_bytes(_num(row.dram_bytes)), findings=int(row.findings)))
    svg = trend_svg(frame, title) if not frame.empty else None
    return environment().get_template("trend.html.j2").render(
        title=title, store=store, label=label or "captured/ingested", rows=rows,
        chart=Markup(svg) if svg else None)
