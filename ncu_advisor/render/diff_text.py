"""Plain-text rendering of a diff (``RunDiff.to_dict()``), sized for a terminal."""

from __future__ import annotations

import re
import shutil
import textwrap

from .formats import SEVERITY_TAGS, fmt_time, safe_text


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def _signed_time(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    return ("+" if ns > 0 else "-" if ns < 0 else "") + fmt_time(abs(ns))


def _kernel_labels(row: dict, width: int) -> list[str]:
    """The kernel column: one name, or the before name and the after name on a second line.

    A name longer than the column wraps onto the next lines of the column (never cut).
    """
    b, a = row["before"], row["after"]

    def wrapped(name: str) -> list[str]:
        return _name_lines(safe_text(name, False), width)

    if b is None or a is None or b["short_name"] == a["short_name"]:
        return wrapped((a or b)["short_name"])
    return wrapped(b["short_name"]) + wrapped("-> " + a["short_name"])


NAME_LINES = 3  # a name in the pairs table takes at most this many lines (JSON has it whole)


def _name_lines(name: str, width: int) -> list[str]:
    """A kernel name in lines of ``width``, broken after underscores where it can be.

    A cuBLAS name runs to 100 characters and more: past :data:`NAME_LINES` lines it ends in
    an ellipsis.
    """
    pieces = re.findall(r"[^_ ]*[_ ]|[^_ ]+", name)
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
        while len(lines[-1]) > width:  # one piece longer than the column: split it
            lines[-1], rest = lines[-1][:width], lines[-1][width:]
            lines.append(rest)
    lines = [line.rstrip() for line in lines] or [""]
    if len(lines) > NAME_LINES:
        lines = [*lines[: NAME_LINES - 1], _clip(lines[NAME_LINES - 1] + "…", width)]
    return lines


def _speedup(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _summary_line(diff: dict) -> str:
    before, after = diff["before"]["total_ns"], diff["after"]["total_ns"]
    speedup, change = diff["speedup"], diff["change_pct"]
    band = diff["noise"]["total_pct"]
    if change is None or speedup is None:
        verdict = "no comparable time"
    elif diff["within_noise"] or change == 0:
        verdict = f"no change beyond noise ({change:+.2f}%)"
    elif speedup >= 1:
        verdict = f"{speedup:.2f}x faster ({change:+.1f}%)"
    else:
        verdict = f"{1 / speedup:.2f}x slower ({change:+.1f}%)"
    noise = f"±{band:.2f}%" if band is not None else "unknown (no times)"
    return (f"ncu-advise diff: {fmt_time(before)} -> {fmt_time(after)} GPU time, {verdict}; "
            f"noise band {noise} ({diff['noise']['method']})")


def render_diff_text(diff: dict, gates: list[dict] | None = None, top: int = 30,
                     width: int | None = None) -> str:
    """Render a diff: totals, the pairs by absolute time change, findings resolved and new.

    Args:
        diff: ``RunDiff.to_dict()``.
        gates: gate results (``GateResult.to_dict()``), when gates were asked for.
        top: how many pairs the table lists.
        width: the terminal width (default: the terminal's, at most 120).

    Returns:
        The text, ending with a newline.

    """
    width = width or min(shutil.get_terminal_size((100, 24)).columns, 120)
    # Lines wrap between words, never inside a number; findings' titles wrap, not cut.
    lines = textwrap.wrap(_summary_line(diff), width, subsequent_indent="  ",
                          break_on_hyphens=False)
    for side in ("before", "after"):
        info = diff[side]
        reps = f", {len(info['repeats'])} repeat(s)" if info["repeats"] else ""
        srcs = ", ".join(info["sources"])
        lines.append(_clip(f"{side + ':':<7} {info['launch_count']} launch(es){reps}: {srcs}",
                           width))
    counts = ", ".join(f"{n} {k}" for k, n in diff["match_counts"].items() if n)
    lines.append(f"pairs: {counts}")
    lines.append("")
    rows = sorted(diff["pairs"], key=lambda r: -abs(r["delta_ns"] or 0.0))
    name_w = max(16, width - 58)  # the columns before the name take 58
    lines.append(f"{'before':>9} {'after':>9} {'change':>10} {'speedup':>8}  {'verdict':<7} "
                 f"{'match':<8} kernel")
    for row in rows[:top]:
        names = _kernel_labels(row, name_w)
        lines.append(f"{fmt_time(row['before_ns']) if row['before_ns'] is not None else '-':>9} "
                     f"{fmt_time(row['after_ns']) if row['after_ns'] is not None else '-':>9} "
                     f"{_signed_time(row['delta_ns']):>10} {_speedup(row['speedup']):>8}  "
                     f"{row['verdict']:<7} {row['match']:<8} {names[0]}")
        lines.extend(f"{'':>58}{name}" for name in names[1:])
    if len(rows) > top:
        lines.append(f"      ... {len(rows) - top} more pairs (use --format json)")
    findings = diff["findings"]
    for status, title in (("resolved", "Resolved findings"), ("new", "New findings")):
        items = findings[status]
        lines.append("")
        if not items:
            lines.append(f"{title}: none")
            continue
        lines.append(f"{title} ({len(items)}):")
        for f in items:
            times = f" (x{f['launches']})" if f["launches"] > 1 else ""
            tag = SEVERITY_TAGS[f["severity"]]
            lines.extend(textwrap.wrap(f"  [{tag}] {f['rule']}: {f['kernel']}{times}", width,
                                       subsequent_indent=" " * 9, break_on_hyphens=False))
            lines.extend(textwrap.wrap(" ".join(f["title"].split()), width,
                                       initial_indent=" " * 9, subsequent_indent=" " * 9,
                                       break_on_hyphens=False))
    kept = findings["kept"]
    worse = [f for f in kept if f["worsened"]]
    lines.append("")
    lines.append(f"Kept findings: {len(kept)}" + (f", {len(worse)} worsened: " + ", ".join(
        f"{f['rule']} on {_clip(f['kernel'], 30)} ({f['before_severity']} -> "
        f"{f['after_severity']})" for f in worse) if worse else ""))
    for gate in gates or []:
        state = "passed" if gate["passed"] else "FAILED"
        lines.extend(textwrap.wrap(f"gate {gate['gate']}: {state}: {gate['reason']}", width,
                                   subsequent_indent="  ", break_on_hyphens=False))
    return "\n".join(safe_text(line) for line in lines) + "\n"
