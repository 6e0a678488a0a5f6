"""Plain-text rendering of an analysis result (the JSON-contract dict), sized for a terminal."""

from __future__ import annotations

import re
import shutil
import textwrap

from .formats import SEVERITY_TAGS, fmt_time, safe_text

# ``--wide``: one line per item, nothing wrapped or shortened.
WIDE = 100_000
# ANSI colours of the severity tags (a terminal, --color always); NO_COLOR turns them off.
SEVERITY_COLOURS = {"HIGH": "1;31", "MED ": "33", "low ": "36", "info": "2"}
_TAG = re.compile(r"\[(HIGH|MED |low |info)\]")


def _wrapped(label: str, text: str, width: int, indent: int = 6,
             hang: int | None = None) -> list[str]:
    """``label`` and ``text`` wrapped to ``width``, indented under the finding.

    Continuation lines line up after the label (or ``hang`` columns in). Long words (a C++
    template name, a path) are broken across lines rather than cut.
    """
    rest = indent + len(label) if hang is None else hang
    return textwrap.wrap(" ".join(text.split()), width, initial_indent=" " * indent + label,
                         subsequent_indent=" " * rest, break_on_hyphens=False)


def terminal_width(width: int | None = None, wide: bool = False) -> int:
    """The width text output is laid out for: ``--wide`` none, else the terminal's (<= 120)."""
    if wide:
        return WIDE
    return width or min(shutil.get_terminal_size((100, 24)).columns, 120)


def colourize(text: str) -> str:
    """Colour the severity tags ``[HIGH]`` ... of rendered text (after escaping)."""
    return _TAG.sub(lambda m: f"\x1b[{SEVERITY_COLOURS[m.group(1)]}m[{m.group(1)}]\x1b[0m",
                    text)


def kernel_label(entry: dict) -> str:
    """A launch's name for a table: its short name, after the operation when that differs.

    ``masked_scale in elementwise_kernel``: the operation tells two launches apart.
    """
    short = entry.get("short_name") or entry["name"]
    op = entry.get("op")
    return f"{op} in {short}" if op and op != short else short


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
KERNEL_FIELDS = ("id", "launch", "source", "name", "short_name", "op", "nvtx", "invocations",
                 "duration_ns", "time_share", "limiter", "not_evaluated")


def limiter_label(entry: dict | None) -> str:
    """A launch's limiter in a few words (``DRAM 86%``, ``memory wait``), from its JSON entry."""
    if not entry:
        return "?"
    from ..derive.limiter import Limiter

    label = Limiter(entry["kind"], entry["unit"], entry["utilization_pct"]).label
    return label if entry["kind"] != "latency" else f"lat: {label}"


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
        lines.extend(textwrap.wrap(head + safe_text(" ".join(a["title"].split()), False),
                                   width, subsequent_indent=" " * 6, break_on_hyphens=False))
        lines.append("      " + ", ".join(facts))
        lines.extend(_wrapped("change: ", safe_text(" ".join(a["change"].split()), False),
                              width))
    return lines


def _headline(result: dict, width: int, selection: str | None) -> list[str]:
    """What was read, in one or two lines broken between facts (never inside a number)."""
    s = result["summary"]
    gpu = result.get("session", {}).get("gpu") or "unknown GPU"
    facts = [f"{s['launch_count']} launch(es) of {s['kernel_count']} kernel(s)",
             f"{fmt_time(s['total_duration_ns'])} GPU time", gpu]
    b = s["bounds"]
    bounds = (f"bounds: {b['memory']} memory, {b['compute']} compute, {b['latency']} latency"
              + (f", {b['unknown']} unknown" if b["unknown"] else ""))
    lines = _joined("ncu-advise: ", facts, width)
    lines.append(bounds)
    if selection:
        lines.extend(_wrapped("", f"showing {selection}", width, indent=0))
    return lines


def _joined(head: str, facts: list[str], width: int) -> list[str]:
    """``head`` and the facts joined by commas, a new line between facts past ``width``."""
    lines = [head]
    for i, fact in enumerate(facts):
        piece = fact + ("," if i < len(facts) - 1 else "")
        if len(lines[-1]) + 1 + len(piece) > width and lines[-1].strip():
            lines.append("  " + piece)
        else:
            lines[-1] += ("" if lines[-1].endswith(" ") or not lines[-1] else " ") + piece
    return lines


def _finding_lines(i: int, f: dict, width: int) -> list[str]:
    """One finding: rule, launches, kernel, saving, title, note, fix, source lines."""
    saving = f.get("estimated_saving_ns")
    gain = (f"saves ~{fmt_time(saving)} ({f['app_saving_pct']:.1f}% of run)" if saving else "")
    if gain and f.get("same_kernel_as"):
        gain += f"; same kernel as #{f['same_kernel_as']}, not additive"
    head = f"{i:>2}. [{SEVERITY_TAGS[f['severity']]}] {f['rule']}: {_ids(f)}"
    kernel = safe_text(f["kernel"], False)
    line = head + kernel
    lines = []
    if len(line) + 2 + len(gain) <= width:
        lines.append(line + (f"  {gain}" if gain else ""))
    else:  # the kernel wraps under the head, the saving on a line of its own
        lines.extend(textwrap.wrap(line, width, subsequent_indent=" " * 6,
                                   break_on_hyphens=False))
        if gain:
            lines.append("      " + gain)
    lines.extend(_wrapped("", f["title"], width))
    severities = f.get("severities") or {}
    if len(severities) > 1:  # members of several severities: each launch's own
        counts = ", ".join(f"{severities[s]} {s}" for s in SEVERITY_TAGS if s in severities)
        lines.extend(_wrapped("", f"launches by their own severity: {counts}", width))
    # What to do is never cut: the advice wraps (the fix is the point of the finding).
    if f.get("note"):
        lines.extend(_wrapped("note: ", f["note"], width))
    if f.get("evidence_source") == "ncu-rule":
        lines.append("      evidence: Nsight Compute's rule message (no raw metric)")
    lines.extend(_wrapped("fix: ", f["advice"], width))
    for src in f.get("source_lines") or []:
        where = f"{src['file'].rsplit('/', 1)[-1]}:{src['line']}"
        stall = f", stall {src['stall']}" if src.get("stall") else ""
        lines.extend(_wrapped(f"at {where} ({src['share_pct']:.0f}%{stall}): ", src["sass"],
                              width, hang=10))
    if f.get("collect_with"):
        lines.extend(_wrapped("lines: ", f["collect_with"], width))
    return lines


# Above this many launches the table sums launches of one kernel name and shape (a training
# loop repeats the same few dozen shapes); --wide lists every launch.
GROUP_LAUNCHES_ABOVE = 50


def _summed_by_shape(kernels: list[dict]) -> list[dict]:
    """One row per kernel name, grid and block: the longest launch, with the shape's sums."""
    from ..analysis.contract import shape_groups

    return [{**kernels[g.first], "duration_ns": g.time_ns, "invocations": g.launches,
             "time_share": g.time_share} for g in shape_groups(kernels)]


def _kernel_table(kernels: list[dict], top: int, width: int, wide: bool) -> list[str]:
    """The launches ranked by GPU time, with their limiter; names shortened to fit."""
    # ncu's IDs restart in every input file: with several files, number launches uniquely.
    several = len({k["source"] for k in kernels}) > 1
    limiter_w = 18
    numbers = [k["launch"] if several else k["id"] for k in kernels]
    id_w = max([4, *(len(str(n)) for n in numbers if n is not None)])
    name_w = max(20, width - 30 - id_w - limiter_w)
    lines = [f"{'#' if several else 'ID':>{id_w}}  {'time':>9}  {'share':>6}  "
             f"{'limiter':<{limiter_w}} {'calls':>5}  kernel"]
    ranked = sorted(kernels, key=lambda k: -(k["duration_ns"] or 0) * k["invocations"])
    summed = not wide and len(kernels) > GROUP_LAUNCHES_ABOVE
    if summed:  # a loop's launches of one kernel and shape as one row: its time counts once
        ranked = _summed_by_shape(kernels)
        lines[0] = lines[0].replace(" time", "total", 1)
    shown = ranked if wide else ranked[: max(top * 2, 20)]
    for k in shown:
        share = f"{100 * k['time_share']:.1f}%" if k["time_share"] is not None else "n/a"
        number = k["launch"] if several else k["id"]
        kid = "" if number is None else str(number)
        name = safe_text(k["name"] if wide else kernel_label(k), False)
        lines.append(f"{kid:>{id_w}}  {fmt_time(k['duration_ns']):>9}  {share:>6}  "
                     f"{_clip(limiter_label(k.get('limiter')), limiter_w):<{limiter_w}} "
                     f"{k['invocations']:>5}  {_clip(name, name_w)}")
    if summed:
        lines.append(f"      {len(kernels)} launches as {len(ranked)} kernel shapes; ID: the "
                     "longest launch")
    if len(ranked) > len(shown):
        lines.append(f"      ... {len(ranked) - len(shown)} more (--wide lists all; --kernel ID "
                     "shows one)")
    return lines


def render_text(result: dict, top: int = 10, width: int | None = None, wide: bool = False,
                color: bool = False, selection: str | None = None) -> str:
    """Render the actions, the launches ranked by GPU time and the top findings.

    Args:
        result: the JSON contract's dictionary (:meth:`Analysis.to_dict`).
        top: how many findings to list (the launch table shows twice as many launches).
        width: the line width (default: the terminal's, at most 120).
        wide: one line per item, full kernel names, every launch (``--wide``).
        color: colour the severity tags with ANSI escapes (a terminal).
        selection: what a ``--kernel``/``--nvtx`` filter kept, said under the headline.

    """
    width = terminal_width(width, wide)
    lines = _headline(result, width, selection)
    for w in result.get("warnings", []):
        lines.extend(_wrapped("warning: ", safe_text(w, newlines=False), width, indent=0))
    lines.extend(_action_lines(result.get("actions", []), width))
    lines.extend(_validity_lines(result.get("validity", []), width))
    lines.append("")
    lines.extend(_region_lines(result.get("regions", []), width))
    lines.extend(_kernel_table(result["kernels"], top, width, wide))
    lines.append("")
    findings = result["findings"]
    if not findings:
        lines.append("No findings above the rules' thresholds.")
    else:
        lines.append(f"Top findings ({min(top, len(findings))} of {len(findings)}):")
        for i, f in enumerate(findings[:top], 1):
            lines.extend(_finding_lines(i, f, width))
    lines.extend(_not_evaluated_lines(result, width))
    text = "\n".join(safe_text(line) for line in lines) + "\n"
    return colourize(text) if color else text


def _not_evaluated_lines(result: dict, width: int) -> list[str]:
    missing = {}
    for k in result["kernels"]:
        for n in k["not_evaluated"]:
            missing.setdefault(n["rule"], n["collect_with"])
    for n in result["summary"].get("application_not_evaluated", []):
        missing.setdefault(n["rule"], n["collect_with"])
    if not missing:
        return []
    lines = ["", f"Not evaluated ({len(missing)} rule(s) lack metrics in this input):"]
    for rule, how in sorted(missing.items()):
        lines.extend(_wrapped(f"{rule}: needs ", how, width, indent=2, hang=6))
    return lines


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
            lines.extend(_wrapped("top: ", f"{f['category']} in {f['kernel']}", width,
                                  indent=4 + 2 * r["depth"]))
    lines.append("")
    return lines


def _plain_qty(value, unit: str | None) -> str:
    """A quantity as text for the terminal ("n/a" where the HTML says "not measured")."""
    from markupsafe import Markup

    from .formats import fmt_qty

    text = fmt_qty(value, unit)
    return "n/a" if isinstance(text, Markup) else str(text)


def render_kernel_text(entry: dict, result: dict, width: int | None = None,
                       wide: bool = False, color: bool = False) -> str:
    """One launch in full (``analyze X --kernel ID``).

    Its name, shape, limiter, roofline, occupancy, key quantities, findings, Nsight Compute's
    rule results and what was not evaluated.

    Args:
        entry: the launch's whole ``kernels`` entry of the JSON contract.
        result: the document it belongs to (for the run's total and its ranked findings).
        width: the line width (default: the terminal's, at most 120).
        wide: no wrapping.
        color: colour the severity tags.

    """
    width = terminal_width(width, wide)
    several = len(result.get("sources") or []) > 1
    number = entry["launch"] if several else entry["id"]
    lines = [f"#{number} {kernel_label(entry)}"]
    lines.extend(_wrapped("", entry["name"], width, indent=2))
    share = entry.get("time_share")
    facts = [f"ID {entry['id']}", f"launch {entry['launch']}", str(entry["source"])]
    lines.extend(_wrapped("", ", ".join(facts), width, indent=2))
    grid = "x".join(str(v) for v in entry.get("grid") or [])
    block = "x".join(str(v) for v in entry.get("block") or [])
    run = [f"grid {grid}", f"block {block}", fmt_time(entry.get("duration_ns"))
           + (f" ({100 * share:.1f}% of GPU time)" if share is not None else ""),
           f"{entry['invocations']} call(s)"]
    lines.extend(_wrapped("", ", ".join(run), width, indent=2))
    where = [f"origin: {entry.get('origin_label') or 'unknown'}"]
    if entry.get("nvtx"):
        where.append(f"NVTX: {entry['nvtx']}")
    lines.extend(_wrapped("", "; ".join(where), width, indent=2))
    limiter = entry.get("limiter")
    if limiter:
        head = limiter.get("headroom_pct")
        lines.extend(_wrapped("limiter: ", f"{limiter['kind']}, {limiter['unit']}"
                              + (f" ({head:.0f}% headroom)" if head is not None else ""),
                              width, indent=2))
    roof = entry.get("roofline") or {}
    if roof.get("bound"):
        lines.extend(_wrapped("roofline: ", f"{roof['bound']}-bound"
                              + (f"; {roof['evidence']}" if roof.get("evidence") else ""),
                              width, indent=2))
    occ = entry.get("occupancy") or {}
    if occ.get("theoretical_pct") is not None:
        achieved = occ.get("achieved_pct")
        lines.extend(_wrapped("occupancy: ", f"theoretical {occ['theoretical_pct']:.1f}%"
                              + (f", achieved {achieved:.1f}%" if achieved is not None else "")
                              + (f", limited by {occ['limiter']}" if occ.get("limiter") else ""),
                              width, indent=2))
    quantities = entry.get("quantities") or {}
    if quantities:
        lines += ["", "Quantities:"]
        label_w = min(40, max(len(q["label"] or name) for name, q in quantities.items()))
        for name, q in quantities.items():
            label = _clip(q["label"] or name, label_w) if not wide else (q["label"] or name)
            lines.append(f"  {label:<{label_w}}  {_plain_qty(q['value'], q['unit'])}")
    findings = entry.get("findings") or []
    lines += ["", f"Findings ({len(findings)}):" if findings else "No findings."]
    for i, f in enumerate(findings, 1):
        saving = f.get("estimated_saving_ns")
        gain = f"  saves ~{fmt_time(saving)}" if saving else ""
        lines.extend(textwrap.wrap(f"{i:>2}. [{SEVERITY_TAGS[f['severity']]}] {f['rule']}{gain}",
                                   width, subsequent_indent=" " * 6))
        lines.extend(_wrapped("", f["title"], width))
        for name, ev in (f.get("evidence") or {}).items():
            lines.extend(_wrapped("", f"{ev.get('label') or name}: "
                                  f"{_plain_qty(ev.get('value'), ev.get('unit'))}", width,
                                  hang=8))
        if f.get("note"):
            lines.extend(_wrapped("note: ", f["note"], width))
        lines.extend(_wrapped("fix: ", f["advice"], width))
        for src in f.get("source_lines") or []:
            loc = f"{src['file'].rsplit('/', 1)[-1]}:{src['line']}"
            lines.extend(_wrapped(f"at {loc} ({src['share_pct']:.0f}%): ", src["sass"], width,
                                  hang=10))
    rules = entry.get("ncu_rules") or []
    if rules:
        lines += ["", "Nsight Compute's rules:"]
        for r in rules:
            gain = f" (est. speedup {r['speedup']:.1f}%)" if r.get("speedup") else ""
            lines.extend(_wrapped(f"[{r.get('type') or '-'}] {r['rule']}{gain}: ",
                                  r.get("description") or r.get("title") or "", width,
                                  indent=2, hang=6))
    skipped = entry.get("not_evaluated") or []
    if skipped:
        lines += ["", "Not evaluated:"]
        for n in skipped:
            lines.extend(_wrapped(f"{n['rule']}: needs ", n["collect_with"], width, indent=2,
                                  hang=6))
    text = "\n".join(safe_text(line) for line in lines) + "\n"
    return colourize(text) if color else text
