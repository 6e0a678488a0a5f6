"""Validity lint: what limits trust in the numbers, said before any advice.

Each check returns entries ``{"check", "severity", "message"}``; ``severity`` is ``warning``
(the numbers or the advice may mislead) or ``info`` (how to read them). Checks read only
what the inputs record: ncu's own notes (``==WARNING==`` lines of a live run, its rule
warnings), the profiler command line where a session page or profile mode gives it, the
sections and values present, and the launches themselves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..derive.limiter import SHORT_LAUNCH_NS
from ..derive.quantities import metrics_of
from ..report import Report
from ..rules_engine.findings import NotEvaluated, metric_sections
from ..rules_engine.schema import Rule

_UNABLE = re.compile(r"Unable to access the following (\d+) metrics?:\s*(.*?)\.?\s*$")
_OPTION = {
    "clock_control": re.compile(r"--clock-control[ =](\S+)"),
    "cache_control": re.compile(r"--cache-control[ =](\S+)"),
    "replay_mode": re.compile(r"--replay-mode[ =](\S+)"),
    "launch_count": re.compile(r"(?:^|\s)(?:-c|--launch-count)[ =](\d+)"),
    "section_set": re.compile(r"--set[ =](\S+)"),
}


def _entry(check: str, severity: str, message: str) -> dict:
    return {"check": check, "severity": severity, "message": message}


def _facts(session: dict) -> dict:
    """Session facts, completed from any profiler command line the inputs recorded."""
    facts = dict(session)
    for value in session.values():
        if not isinstance(value, str) or "--" not in value:
            continue
        for key, pattern in _OPTION.items():
            match = pattern.search(value)
            if match and key not in facts:
                facts[key] = match.group(1)
    return facts


def _messages(session: dict) -> list[str]:
    messages = session.get("ncu_messages") or []
    return [m for m in messages if isinstance(m, str)]


def check_clocks(report: Report, facts: dict) -> list[dict]:
    """Clock control: unlocked clocks make absolute durations vary from run to run."""
    notes = [m for m in _messages(facts) if "unmodified GPU clocks" in m]
    control = facts.get("clock_control")
    # The warnings first: every description as a string was ~250 MB at 1 GB of text.
    warned = report.ncu_rules[report.ncu_rules["type"].eq("WRN").to_numpy(dtype=bool)]
    rule_notes = warned[warned["description"].astype(str).str.contains(
        "clock", case=False, na=False).to_numpy(dtype=bool)]
    if notes or control == "none":
        said = "ncu noted it ran with unmodified GPU clocks" if notes else (
            "the capture used --clock-control none")
        return [_entry("clocks", "warning",
                       f"{said}: the GPU boosts and throttles freely, so absolute durations "
                       "vary with clocks and temperature between runs. Compare runs made the "
                       "same way, use shares and ratios rather than microseconds, or lock "
                       "clocks (--clock-control base) for repeatable timings.")]
    if control == "base":
        return [_entry("clocks", "info",
                       "clocks were locked to base (--clock-control base): durations are "
                       "repeatable but longer than at the boost clocks the program sees "
                       "outside the profiler.")]
    if not rule_notes.empty:
        return [_entry("clocks", "warning",
                       f"ncu warned about clocks on {rule_notes['launch'].nunique()} launch(es): "
                       f"{str(rule_notes['description'].iloc[0])[:160]}")]
    return [_entry("clocks", "info",
                   "the input does not record clock control (imports and .ncu-rep files read "
                   "here do not): ncu locks clocks to base by default, --clock-control none "
                   "leaves them free; absolute durations depend on which.")]


def _affected_rules(metrics: Iterable[str], rules: list[Rule]) -> list[str]:
    """Rules that need any of these metrics (through the quantities they require)."""
    wanted = set(metrics)
    hit = []
    for rule in rules:
        needs = {m for q in rule.needs for m in _safe_metrics(q)}
        if needs & wanted:
            hit.append(rule.id)
    return hit


def _safe_metrics(quantity: str) -> tuple[str, ...]:
    try:
        return metrics_of(quantity)
    except KeyError:
        return ()


def check_unavailable(report: Report, facts: dict, rules: list[Rule]) -> list[dict]:
    """Metrics ncu said it could not collect, and metrics exported as n/a."""
    out = []
    for message in _messages(facts):
        match = _UNABLE.search(message)
        if not match:
            continue
        names = [n.strip() for n in match.group(2).split(",") if n.strip()]
        affected = _affected_rules(names, rules)
        effect = (f"rules affected: {', '.join(affected)}" if affected
                  else "no check of ncu-advise uses them")
        out.append(_entry("unavailable-metrics", "info" if not affected else "warning",
                          f"ncu could not collect {match.group(1)} metric(s) "
                          f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}); "
                          f"{effect}."))
    # "n/a" parses to no number: only the (few) rows without a value are read as text.
    rows = np.flatnonzero(report.metrics["value"].isna().to_numpy())
    text = pd.Series(report.texts(rows), dtype=object).astype(str).str.strip().str.lower()
    metric = report.metrics["metric"].iloc[rows].reset_index(drop=True)
    na = metric[text.eq("n/a").to_numpy()].dropna().unique().tolist()
    if na:
        affected = _affected_rules(na, rules)
        effect = (f"rules affected: {', '.join(affected)}" if affected
                  else "no check of ncu-advise uses them")
        out.append(_entry("unavailable-metrics", "info" if not affected else "warning",
                          f"{len(na)} metric(s) were exported as n/a "
                          f"({', '.join(sorted(na)[:4])}{', ...' if len(na) > 4 else ''}); "
                          f"{effect}."))
    return out


_SET_ORDER = ("basic", "detailed", "full")


def _sections_collected(report: Report) -> tuple[set[str], str | None]:
    """The sections the capture collected, and the largest ncu set they point to.

    Sections show through their metrics (any form) and through ncu's rule rows, which name
    the section identifier even when the details page prints none of its metrics. A section
    only ``--set full`` collects implies the whole set was collected.
    """
    table = metric_sections()
    set_of = dict(table.values())
    seen = {table[m][0] for m in report.metrics["metric"].dropna().unique() if m in table}
    seen |= set(report.ncu_rules["section"].dropna().astype(str))
    sets = {set_of[s] for s in seen if set_of.get(s)}
    largest = max(sets, key=_SET_ORDER.index, default=None) if sets else None
    if largest:
        wanted = _SET_ORDER[: _SET_ORDER.index(largest) + 1]
        seen |= {s for s, set_name in set_of.items() if set_name in wanted}
    return seen, largest


def check_sections(report: Report, facts: dict, not_evaluated: list[NotEvaluated],
                   rules: list[Rule]) -> list[dict]:
    """Sections missing for whole families of checks, with the --set or --section adding them.

    A missing metric whose section the input did collect was left out by the export (a
    details page prints only the section bodies): the raw page or the ``.ncu-rep`` has it.
    """
    if not not_evaluated:
        return []
    table = metric_sections()
    present, largest = _sections_collected(report)
    categories = {r.id: r.category for r in rules}
    absent: dict[str, set[str]] = {}  # "--section X (--set Y)" -> rule families
    unexported: set[str] = set()  # families whose metrics the export left out
    for n in not_evaluated:
        family = categories.get(n.rule, n.rule)
        for metric in n.missing:
            section, set_name = table.get(metric, (None, None))
            if section and section not in present:
                key = f"--section {section}" + (f" (in --set {set_name})" if set_name else "")
                absent.setdefault(key, set()).add(family)
            else:
                unexported.add(family)
    declared = facts.get("section_set")
    if declared:
        what = f"this is a --set {declared} capture"
    elif report.metrics["section"].astype(str).eq("Command line profiler metrics").any():
        what = "this is a --metrics capture (no sections)"
    elif largest in ("basic", "detailed"):
        what = f"this looks like a --set {largest} capture (only its sections are present)"
    else:
        what = "the input lacks some sections"
    out = []
    if absent:
        families = sorted({c for v in absent.values() for c in v})
        parts = [f"{k} for {', '.join(sorted(v))}" for k, v in sorted(absent.items())]
        out.append(_entry("missing-sections", "warning",
                          f"{what}: the checks of {len(families)} famil"
                          f"{'y' if len(families) == 1 else 'ies'} ({', '.join(families)}) "
                          f"lack their sections; profile with --set full, or add "
                          f"{'; '.join(parts)}."))
    if unexported and report.details_only:
        out.append(_entry("missing-metrics", "warning",
                          f"a details-page export prints only the section bodies: the checks "
                          f"of {', '.join(sorted(unexported))} need metrics it leaves out; "
                          "analyze the .ncu-rep, or add the raw page of the same capture "
                          "(ncu --import R.ncu-rep --csv --page raw)."))
    elif unexported:
        out.append(_entry("missing-metrics", "info",
                          f"the checks of {', '.join(sorted(unexported))} lack metrics that "
                          "no section of this input holds (see each kernel's not-evaluated "
                          "list for the --metrics to add)."))
    return out


def check_short_launches(report: Report) -> list[dict]:
    """Launches so short that launch overhead, not the kernel, dominates their time."""
    launches = report.launches
    d = launches["duration_ns"].astype(float)
    short = launches[d < SHORT_LAUNCH_NS]
    if short.empty:
        return []
    weight = launches["invocations"].fillna(1).astype(float)
    total = float(np.nansum(d * weight))
    share = float(np.nansum(short["duration_ns"] * short["invocations"].fillna(1))) / total \
        if total else float("nan")
    n = int(short["invocations"].fillna(1).sum())
    names = ", ".join(list(dict.fromkeys(short["short_name"].astype(str)))[:3])
    return [_entry("short-launches", "info",
                   f"{n} launch(es) ran under {SHORT_LAUNCH_NS / 1000:.0f} us ({100 * share:.1f}% "
                   f"of GPU time; {names}): launch overhead dominates them, so their per-kernel "
                   "metrics say little; batch, fuse or capture them in a CUDA graph instead.")]


def check_launch_limit(report: Report, facts: dict) -> list[dict]:
    """A launch count limit (-c) that the run reached: later kernels were not profiled."""
    limit = facts.get("launch_count")
    if limit is None:
        return []
    try:
        limit = int(limit)
    except (TypeError, ValueError):
        return []
    n = len(report.launches)
    if n < limit:
        return [_entry("launch-limit", "info",
                       f"the capture allowed {limit} launches (-c {limit}) and the program ran "
                       f"{n}: every launch was profiled.")]
    return [_entry("launch-limit", "warning",
                   f"ncu stopped profiling at its launch count limit (-c {limit}): the program "
                   "may have launched more kernels, so time shares and hot spots cover only "
                   f"the first {n}.")]


def check_mixed(report: Report, facts: dict) -> list[dict]:
    """Several GPUs, ncu versions or separate runs analyzed together."""
    out = []
    names = report.metric_rows(["device__attribute_display_name"], ["launch", "text"]
                               ).drop_duplicates("launch")
    gpus = sorted(set(names["text"].astype(str)))
    ccs = sorted(set(report.launches["cc"].dropna().astype(str)))
    if len(gpus) > 1 or len(ccs) > 1:
        what = ", ".join(gpus) if len(gpus) > 1 else "compute capabilities " + ", ".join(ccs)
        out.append(_entry("mixed-gpus", "warning",
                          f"launches from several GPUs are analyzed together ({what}): time "
                          "shares and roofline peaks mix devices; analyze each GPU's runs "
                          "apart."))
    versions = facts.get("ncu_versions") or facts.get("ncu_version")
    if isinstance(versions, list | tuple) and len(set(versions)) > 1:
        out.append(_entry("mixed-ncu", "warning",
                          f"the inputs come from several ncu versions ({', '.join(versions)}): "
                          "metric names and rule thresholds may differ between them."))
    processes = report.launches["process_id"].dropna().unique()
    if len(processes) > 1:
        out.append(_entry("mixed-runs", "info",
                          f"launches of {len(processes)} separate runs (process IDs) are "
                          "analyzed together: time shares are of all of them."))
    return out


def check_duplicates(report: Report) -> list[dict]:
    """Exports of one capture merged, and the same launches read twice without a key."""
    out = []
    merged = int(report.session.get("merged_launches", 0) or 0)
    if merged:
        out.append(_entry("merged-exports", "info",
                          f"{merged} launch record(s) appeared in several exports of one "
                          "capture (same process, ID, kernel and shape) and count once."))
    launches = report.launches
    if launches["source"].nunique() < 2:
        return out
    keys = ["short_name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    # Sources grouped by their launches' shapes (exact), then by durations (within 1% of a
    # group's first source): one entry per group. Comparing every pair of sources was
    # quadratic in time and in entries (a folder of 2,000 one-launch copies of nine
    # launches gave 222,000 entries, of 10,000 files 5.5 million).
    groups: dict[tuple, list[tuple[np.ndarray, list[str]]]] = {}
    # The texts once for the table, not per source (a groupby cost ~4 ms a source).
    rows = list(map(tuple, launches[keys].astype(str).to_numpy()))
    all_durations = launches["duration_ns"].astype(float).to_numpy()
    by_source: dict[str, list[int]] = {}
    for i, source in enumerate(launches["source"].tolist()):
        by_source.setdefault(source, []).append(i)
    for source, at in by_source.items():
        shapes = tuple(rows[i] for i in at)
        durations = all_durations[at]
        same = groups.setdefault(shapes, [])
        for first, members in same:
            if np.allclose(first, durations, rtol=0.01, equal_nan=True):
                members.append(str(source))
                break
        else:
            same.append((durations, [str(source)]))
    for shapes, same in groups.items():
        for _, members in same:
            if len(members) < 2:
                continue
            names = (f"{members[0]} and {members[1]}" if len(members) == 2 else
                     f"{members[0]}, {members[1]} and {len(members) - 2} other input(s)")
            out.append(_entry("duplicate-launches", "warning",
                              f"{names} hold the same {len(shapes)} launch(es) (same "
                              "kernels, shapes and durations) without a shared process "
                              "ID: they are counted "
                              + ("twice" if len(members) == 2 else f"{len(members)} times")
                              + "; read one form of a capture."))
    return out


def check_cache_replay(facts: dict) -> list[dict]:
    """Cache control and replay mode, where the input records them."""
    out = []
    cache = facts.get("cache_control")
    if cache == "all":
        out.append(_entry("cache-control", "info",
                          "caches were flushed before every replay pass (--cache-control all): "
                          "hit rates and DRAM traffic are of a cold cache, higher than when the "
                          "kernel runs right after its producer in the program."))
    elif cache == "none":
        out.append(_entry("cache-control", "info",
                          "caches were not flushed between replay passes (--cache-control "
                          "none): later passes may see data cached by earlier ones, so hit "
                          "rates can look better than in one real run."))
    replay = facts.get("replay_mode")
    if replay:
        out.append(_entry("replay-mode", "info",
                          f"replay mode {replay}: metrics of one launch come from several "
                          "passes of it" + (" (kernel replay restores memory before each)"
                                            if replay == "kernel" else
                                            " (the whole application or range is re-run)")
                          + "."))
    return out


def validity_checks(report: Report, rules: list[Rule], not_evaluated: list[NotEvaluated],
                    extra_session: dict | None = None) -> list[dict]:
    """Every validity entry for one analysis, most important checks first.

    Args:
        report: the Report analyzed.
        rules: the rules that ran (to say which ones unavailable metrics affect).
        not_evaluated: the rules that lacked metrics (each distinct entry once is enough:
            only their rules and missing metrics are read).
        extra_session: facts the caller knows beyond the inputs (profile mode: the ncu
            command, set, clock and cache control).

    """
    facts = _facts({**report.session, **(extra_session or {})})
    out: list[dict] = []
    out += check_clocks(report, facts)
    out += check_unavailable(report, facts, rules)
    out += check_sections(report, facts, not_evaluated, rules)
    out += check_short_launches(report)
    out += check_launch_limit(report, facts)
    out += check_mixed(report, facts)
    out += check_duplicates(report)
    out += check_cache_replay(facts)
    order = {"warning": 0, "info": 1}
    return sorted(out, key=lambda e: order.get(e["severity"], 2))


def frame(entries: list[dict]) -> pd.DataFrame:
    """The validity entries as a table (notebooks)."""
    return pd.DataFrame(entries, columns=["check", "severity", "message"])
