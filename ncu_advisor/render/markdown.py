"""Markdown: a compact report for a pull-request comment or an LLM agent (``-f markdown``).

Bounded: the actions first (what to change, each with its launches, share and saving), then
the top findings as one table, the hottest launches and the validity notes; at most
:data:`MAX_CHARS` characters whatever the input (a GitHub comment holds 65,536). Names from
reports are C++ templates: every text is escaped for Markdown, names sit in code spans.
"""

from __future__ import annotations

import re

from .._version import __version__
from .formats import fmt_time, safe_text

MAX_CHARS = 12_000
TOP_ACTIONS = 5
TOP_LAUNCHES = 10
SEVERITY = {"high": "HIGH", "medium": "MED", "low": "low", "info": "info"}
# What could turn text into emphasis, links, HTML, code or a table cell; a backslash makes
# each literal (CommonMark, "Backslash escapes"). Names from reports go in code spans instead.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")


def md(text: str) -> str:
    """Plain text as Markdown that renders as written (one line, no HTML, no links)."""
    return _SPECIAL.sub(r"\\\1", safe_text(" ".join(str(text).split()), newlines=False))


def code(text: str) -> str:
    """A name as a code span (backticks inside become quotes; a table's pipe is escaped)."""
    name = safe_text(" ".join(str(text).split()), newlines=False).replace("`", "'")
    return "`" + name.replace("|", "\\|") + "`"


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _actions(actions: list[dict]) -> list[str]:
    if not actions:
        return ["No change to suggest: no medium or high finding.", ""]
    lines = [f"### Start here ({min(TOP_ACTIONS, len(actions))} of {len(actions)})", ""]
    for i, a in enumerate(actions[:TOP_ACTIONS], 1):
        saving = a.get("estimated_saving_ns")
        facts = [f"{a['launch_count']} launch(es)", f"{_pct(a.get('time_at_stake_pct'))} of "
                 "GPU time", f"saves ~{fmt_time(saving)}" if saving else "no estimate"]
        lines.append(f"{i}. **{SEVERITY[a['severity']]}: {md(a['title'])}** ({', '.join(facts)})")
        lines.append(f"   {md(a['change'])}")
    lines.append("")
    return lines


def _findings(findings: list[dict], top: int) -> list[str]:
    if not findings:
        return []
    lines = [f"### Top findings ({min(top, len(findings))} of {len(findings)})", "",
             "| # | severity | rule | launches | kernel | saves | what |",
             "|---|---|---|---|---|---|---|"]
    for i, f in enumerate(findings[:top], 1):
        ids = list(dict.fromkeys(f.get("kernel_ids") or []))
        shown = ", ".join(f"#{n}" for n in ids[:3]) + (f" +{len(ids) - 3}" if len(ids) > 3 else "")
        saving = f.get("estimated_saving_ns")
        gain = f"{fmt_time(saving)} ({f['app_saving_pct']:.1f}%)" if saving else "-"
        where = ""
        lines_ = f.get("source_lines") or []
        if lines_:
            src = lines_[0]
            where = f" at {code(src['file'].rsplit('/', 1)[-1] + ':' + str(src['line']))}"
        lines.append(f"| {i} | {SEVERITY[f['severity']]} | {code(f['rule'])} | {shown or '-'} | "
                     f"{code(f['kernel'])} | {gain} | {md(f['title'])}{where} |")
    lines.append("")
    return lines


def _launches(kernels: list[dict]) -> list[str]:
    ranked = sorted(kernels, key=lambda k: -(k["duration_ns"] or 0) * k["invocations"])
    if not ranked:
        return []
    several = len({k["source"] for k in kernels}) > 1
    lines = [f"### Launches by GPU time (top {min(TOP_LAUNCHES, len(ranked))} of {len(ranked)})",
             "", "| ID | time | share | kernel |", "|---|---|---|---|"]
    for k in ranked[:TOP_LAUNCHES]:
        share = None if k["time_share"] is None else 100 * k["time_share"]
        name = k.get("short_name") or k["name"]
        if k.get("op") and k["op"] != name:
            name = f"{k['op']} in {name}"
        lines.append(f"| {k['launch'] if several else k['id']} | {fmt_time(k['duration_ns'])} | "
                     f"{_pct(share)} | {code(name)} |")
    lines.append("")
    return lines


def _validity(entries: list[dict]) -> list[str]:
    if not entries:
        return []
    lines = ["### Validity", ""]
    lines += [f"- {'**warning**' if e['severity'] == 'warning' else 'note'} "
              f"({code(e['check'])}): {md(e['message'])}" for e in entries]
    return [*lines, ""]


def render_markdown(result: dict, top: int = 10, max_chars: int = MAX_CHARS) -> str:
    """Render the JSON contract's dictionary as a short Markdown report, actions first.

    Args:
        result: what :meth:`Analysis.to_dict` returns.
        top: how many findings the table lists at most.
        max_chars: the longest report (findings, then launches, then validity notes are
            dropped from the end to stay under it; the actions and the headline stay).

    """
    s = result["summary"]
    gpu = (result.get("session") or {}).get("gpu") or "unknown GPU"
    b = s["bounds"]
    head = ["## ncu-advise: what to change first", "",
            f"{s['launch_count']} launch(es) of {s['kernel_count']} kernel(s), "
            f"{fmt_time(s['total_duration_ns'])} GPU time, {md(gpu)}; bounds: {b['memory']} "
            f"memory, {b['compute']} compute, {b['latency']} latency", ""]
    foot = ["", f"<sub>ncu-advise {md(__version__)} from {len(result.get('sources') or [])} "
                "input file(s); everything: `ncu-advise analyze ... -f html` or `-f json`</sub>"]
    shown = top
    while True:
        body = [*head, *_actions(result.get("actions") or []),
                *_findings(result["findings"], shown), *_launches(result["kernels"]),
                *_validity(result.get("validity") or [])]
        text = "\n".join([*body, *foot]) + "\n"
        if len(text) <= max_chars or shown == 0:
            break
        shown = max(0, shown - max(1, shown // 3))
    if len(text) > max_chars:  # the actions alone are too long: keep whole lines that fit
        kept, size = [], len("\n".join(foot)) + 40
        for line in body:
            if size + len(line) + 1 > max_chars:
                kept.append("*(cut to stay short; -f json has everything)*")
                break
            kept.append(line)
            size += len(line) + 1
        text = "\n".join([*kept, *foot]) + "\n"
    return text
