"""Plain-text rendering of an analysis result (the JSON-contract dict), sized for a terminal."""

from __future__ import annotations

import shutil
import textwrap

from .formats import SEVERITY_TAGS, fmt_time, safe_text


def _wrapped(label: str, text: str, width: int) -> list[str]:
    """``label`` and ``text`` wrapped to ``width``, indented under the finding."""
    return textwrap.wrap(" ".join(text.split()), width, initial_indent="      " + label,
                         subsequent_indent=" " * (6 + len(label)), break_on_hyphens=False)


def _ids(finding: dict) -> str:
    """The launches a finding is about, by ncu's ID (``#3 ``, ``#3,#7 `` or ``#3 +4 ``)."""
    ids = list(dict.fromkeys(finding.get("kernel_ids") or []))
    if not ids:
        return ""
    shown = ",".join(f"#{i}" for i in ids[:2])
    return f"{shown}{f' +{len(ids) - 2}' if len(ids) > 2 else ''} "


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


# The fields of a ``kernels`` entry render_text reads (Analysis.to_dict builds only these;
# of the roofline, the bound: the whole of it was ~3 KB a launch).
KERNEL_FIELDS = ("id", "launch", "source", "name", "invocations", "duration_ns", "time_share",
                 "limiter", "not_evaluated")


def limiter_label(entry: dict | None) -> str:
    """A launch's limiter in a few words (``DRAM 86%``, ``memory wait``), from its JSON entry."""
    if not entry:
        return "?"
    from ..derive.limiter import Limiter

    label = Limiter(entry["kind"], entry["unit"], entry["utilization_pct"]).label
    return label if entry["kind"] != "latency" else f"lat: {label}"[:15]


# Actions shown first; the rest are in the JSON (and the findings below name them all).
TOP_ACTIONS = 5


def _action_lines(actions: list[dict], width: int) -> list[str]:
    """"Start here": the ranked changes, each with its launches, time at stake and saving."""
    if not actions:
        return []
    lines = ["", f"Start here ({min(TOP_ACTIONS, len(actions))} of {len(actions)} "
                 "change(s), each saving counted once):"]
    for i, a in enumerate(actions[:TOP_ACTIONS], 1):
        stake = a.get("time_at_stake_pct")
        saving = a.get("estimated_saving_ns")
        facts = [f"{a['launch_count']} launch(es)"]
        if stake is not None:
            facts.append(f"{stake:.1f}% of GPU time")
        facts.append(f"saves ~{fmt_time(saving)}" if saving else "no estimate")
        head = f"{i:>2}. [{SEVERITY_TAGS[a['severity']]}] "
        lines.append(_clip(head + safe_text(" ".join(a["title"].split()), False), width))
        lines.append("      " + ", ".join(facts))
        lines.extend(_wrapped("change: ", safe_text(" ".join(a["change"].split()), False),
                              width))
    return lines


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
    lines.extend(_action_lines(result.get("actions", []), width))
    lines.extend(_validity_lines(result.get("validity", []), width))
    lines.append("")
    lines.extend(_region_lines(result.get("regions", []), width))
    name_w = max(20, width - 51)
    # ncu's IDs restart in every input file: with several files, number launches uniquely.
    several = len({k["source"] for k in result["kernels"]}) > 1
    lines.append(f"{'#' if several else 'ID':>4}  {'time':>9}  {'share':>6}  "
                 f"{'limiter':<15} {'calls':>5}  kernel")
    kernels = sorted(result["kernels"], key=lambda k: -(k["duration_ns"] or 0) * k["invocations"])
    for k in kernels[: max(top * 2, 20)]:
        share = f"{100 * k['time_share']:.1f}%" if k["time_share"] is not None else "n/a"
        number = k["launch"] if several else k["id"]
        kid = "" if number is None else str(number)
        limiter = limiter_label(k.get("limiter"))
        lines.append(f"{kid:>4}  {fmt_time(k['duration_ns']):>9}  {share:>6}  "
                     f"{limiter:<15} {k['invocations']:>5}  "
                     f"{_clip(safe_text(k['name'], False), name_w)}")
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
            head = f"{i:>2}. [{SEVERITY_TAGS[f['severity']]}] {f['rule']}: {_ids(f)}"
            line = head + _clip(safe_text(f["kernel"], False), max(20, width - len(head)))
            if len(line) + len(gain) <= width:
                lines.append(line + gain)
            else:  # the saving on a line of its own rather than past the edge
                lines.extend([line, "      " + gain.strip()] if gain else [line])
            lines.append(textwrap.indent(textwrap.fill(f["title"], width - 6), "      "))
            # What to do is never cut: the advice wraps (the fix is the point of the finding).
            if f.get("note"):
                lines.extend(_wrapped("note: ", f["note"], width))
            if f.get("evidence_source") == "ncu-rule":
                lines.append("      evidence: Nsight Compute's rule message (no raw metric)")
            lines.extend(_wrapped("fix: ", f["advice"], width))
            for src in f.get("source_lines") or []:
                where = f"{src['file'].rsplit('/', 1)[-1]}:{src['line']}"
                stall = f", stall {src['stall']}" if src.get("stall") else ""
                lines.append(_clip(f"      at {where} ({src['share_pct']:.0f}%{stall}): "
                                   f"{src['sass']}", width))
            if f.get("collect_with"):
                lines.append(_clip("      lines: " + f["collect_with"], width))
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


def _validity_lines(entries: list[dict], width: int) -> list[str]:
    """What limits trust in the numbers, first thing after the headline."""
    if not entries:
        return []
    lines = ["", "Validity:"]
    for e in entries:
        mark = "!" if e["severity"] == "warning" else "-"
        text = textwrap.fill(f"{mark} {e['check']}: {e['message']}", width - 2,
                             subsequent_indent="    ")
        lines.append(textwrap.indent(text, "  "))
    return lines


def _region_lines(regions: list[dict], width: int) -> list[str]:
    """NVTX regions, outer before inner (indented), with time, share, launches and bounds."""
    if not regions:
        return []
    parents = {r["parent"] for r in regions}
    name_w = max(24, min(44, width - 56))
    lines = [f"  {'NVTX range':<{name_w}}  {'time':>9}  {'share':>6}  {'calls':>5}  "
             f"{'kern':>4}  bounds (c/l/m)"]
    for r in regions:
        share = f"{100 * r['time_share']:.1f}%" if r["time_share"] is not None else "n/a"
        mix = "/".join(f"{v}{k[0]}" for k, v in sorted(r["bounds"].items()))
        leaf = r["name"].rsplit("/", 1)[-1] if r["depth"] else r["name"]
        label = _clip("  " * r["depth"] + leaf, name_w)
        lines.append(f"  {label:<{name_w}}  {fmt_time(r['duration_ns']):>9}  {share:>6}  "
                     f"{r['launches']:>5}  {r['kernels']:>4}  {mix}")
        top = r["top_findings"][:1]
        if top and r["name"] not in parents:  # innermost ranges: their main finding
            f = top[0]
            lines.append(_clip(f"  {'  ' * r['depth']}  top: {f['category']} in "
                               f"{f['kernel']}", width))
    lines.append("")
    return lines
