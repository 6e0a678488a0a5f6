"""Plain-text rendering of an analysis result (the JSON-contract dict), sized for a terminal."""

from __future__ import annotations

import re
import shutil
import textwrap

_SEV = {"high": "HIGH", "medium": "MED ", "low": "low ", "info": "info"}


# Terminal control characters (ESC, BEL, CR, ...), bidi overrides and line/paragraph
# separators in kernel names or file names could rewrite the terminal or reorder the text.
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2069\ufeff]")


def safe_text(text: str, newlines: bool = True) -> str:
    r"""Escape control, bidi and line-separator characters (``\x1b``, ``\u202e``).

    ``newlines=False`` escapes ``\n`` too (names and one-line fields).
    """
    if not newlines:
        text = text.replace("\n", "\\x0a")
    return _UNSAFE.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                  else f"\\u{ord(m.group()):04x}"), text)


def fmt_time(ns: float | None) -> str:
    """Format nanoseconds as ns/us/ms/s."""
    if ns is None:
        return "n/a"
    for limit, div, unit in ((1e9, 1e9, "s"), (1e6, 1e6, "ms"), (1e3, 1e3, "us")):
        if abs(ns) >= limit:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.0f} ns"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def render_text(result: dict, top: int = 10, width: int | None = None) -> str:
    """Render the launches ranked by GPU time and the top findings."""
    width = width or min(shutil.get_terminal_size((100, 24)).columns, 120)
    lines = []
    s = result["summary"]
    session = result.get("session", {})
    gpu = session.get("gpu") or "unknown GPU"
    lines.append(f"ncu-advise: {s['launch_count']} launch(es) of {s['kernel_count']} kernel(s), "
                 f"{fmt_time(s['total_duration_ns'])} GPU time, {gpu}")
    b = s["bounds"]
    lines.append(f"bounds: {b['memory']} memory, {b['compute']} compute, {b['latency']} latency"
                 + (f", {b['unknown']} unknown" if b["unknown"] else ""))
    for w in result.get("warnings", []):
        lines.append(f"warning: {_clip(safe_text(w, newlines=False), width - 9)}")
    lines.append("")
    name_w = max(20, width - 44)
    lines.append(f"{'ID':>4}  {'time':>9}  {'share':>6}  {'bound':<8} {'calls':>5}  kernel")
    kernels = sorted(result["kernels"], key=lambda k: -(k["duration_ns"] or 0) * k["invocations"])
    for k in kernels[: max(top * 2, 20)]:
        share = f"{100 * k['time_share']:.1f}%" if k["time_share"] is not None else "n/a"
        bound = k["roofline"]["bound"] or "?"
        kid = "" if k["id"] is None else str(k["id"])
        lines.append(f"{kid:>4}  {fmt_time(k['duration_ns']):>9}  {share:>6}  {bound:<8} "
                     f"{k['invocations']:>5}  {_clip(safe_text(k['name'], False), name_w)}")
    if len(kernels) > max(top * 2, 20):
        lines.append(f"      ... {len(kernels) - max(top * 2, 20)} more (use --format json)")
    lines.append("")
    findings = result["findings"]
    if not findings:
        lines.append("No findings above the rules' thresholds.")
    else:
        lines.append(f"Top findings ({min(top, len(findings))} of {len(findings)}):")
        for i, f in enumerate(findings[:top], 1):
            saving = f.get("estimated_saving_ns")
            gain = (f"  saves ~{fmt_time(saving)} ({f['app_saving_pct']:.1f}% of run)"
                    if saving else "")
            lines.append(f"{i:>2}. [{_SEV[f['severity']]}] {f['category']}: "
                         f"{_clip(safe_text(f['kernel'], False), 40)}{gain}")
            lines.append(textwrap.indent(textwrap.fill(f["title"], width - 6), "      "))
            advice = " ".join(f["advice"].split())
            first = advice.split(". ")[0].rstrip(".") + "."
            lines.append(_clip("      fix: " + first, width))
    missing = {}
    for k in result["kernels"]:
        for n in k["not_evaluated"]:
            missing.setdefault(n["rule"], n["collect_with"])
    for n in result["summary"].get("application_not_evaluated", []):
        missing.setdefault(n["rule"], n["collect_with"])
    if missing:
        lines.append("")
        lines.append(f"Not evaluated ({len(missing)} rule(s) lack metrics in this input):")
        for rule, how in sorted(missing.items()):
            lines.append(_clip(f"  {rule}: needs {how}", width))
    return "\n".join(safe_text(line) for line in lines) + "\n"
