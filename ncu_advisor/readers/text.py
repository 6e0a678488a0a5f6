"""Reader for Nsight Compute's plain-text output: ``ncu ./app > log.txt`` and ``ncu --import``.

The text form is the details page laid out for people::

    [1985] python3.12@127.0.0.1
      add_kernel (65536, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
        NVTX Push/Pop Stack for Thread 514:          (only with --nvtx)
          <default domain>
            <0,model>
        Warning: Data collection happened without fixed GPU frequencies. ...
        Section: GPU Speed Of Light Throughput
        ----------------------- ----------- ------------
        Metric Name             Metric Unit Metric Value
        ----------------------- ----------- ------------
        Duration                         us       182.37
        ----------------------- ----------- ------------

        OPT   Est. Local Speedup: 96.05%
              All compute pipelines are under-utilized. ...   (wrapped at a fixed width)

Tables are cut into columns at the spans of their dash rulers. Values go through the same
unit conversion and label table as the details CSV, so both forms give the same numbers at the
same precision. Rule ids are not printed: they are recovered from the section and the text
(``_RULES``). A live run mixes ``==PROF==`` lines and the program's own output in; the former
go to ``session["ncu_messages"]`` as the CSV reader stores them, the latter are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ReportParseError
from ..report import METRIC_COLUMNS, RULE_COLUMNS, Report
from .common import read_input_bytes

# The details CSV reader's building blocks: one conversion of launches, units and labels for
# both forms of the details page.
from .csv_export import decode, finish_report, launch_table, split_metric_names, unit_column
from .labels import resolve_labels

PROCESS = re.compile(r"^\[(\d+)\] (.+)$")
KERNEL = re.compile(
    r"^  (?P<name>\S.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\)"
    r"(?P<rest>(?:, [A-Za-z][A-Za-z ]* [\w.]+)*)$")
_ATTRIBUTE = re.compile(r", ([A-Za-z][A-Za-z ]*?) ([\w.]+)")
_RULER = re.compile(r"^ {4}-+( -+)*$")
_RULE_START = re.compile(r"^ {4}(OPT|INF|WRN|ERR) {3}(.*)$")
_SPEEDUP = re.compile(r"^Est\. (?:(Local|Global) )?Speedup: ([-+0-9.eE]+)%$")
_NVTX_RANGE = re.compile(r"^<\d+,(.*)>$")
_METRIC_HEADER = ["Metric Name", "Metric Unit", "Metric Value"]

# Section titles as printed -> the section identifiers that the CSV's rule rows name
# (ncu's sections/*.section files).
SECTION_IDS = {
    "GPU Speed Of Light Throughput": "SpeedOfLight",
    "GPU Speed Of Light Roofline Chart": "SpeedOfLight_RooflineChart",
    "PM Sampling": "PmSampling",
    "Compute Workload Analysis": "ComputeWorkloadAnalysis",
    "Memory Workload Analysis": "MemoryWorkloadAnalysis",
    "Memory Workload Analysis Chart": "MemoryWorkloadAnalysis_Chart",
    "Memory Workload Analysis Tables": "MemoryWorkloadAnalysis_Tables",
    "NUMA Affinity": "NumaAffinity",
    "Scheduler Statistics": "SchedulerStats",
    "Warp State Statistics": "WarpStateStats",
    "Instruction Statistics": "InstructionStats",
    "Launch Statistics": "LaunchStats",
    "Occupancy": "Occupancy",
    "GPU and Memory Workload Distribution": "WorkloadDistribution",
    "Source Counters": "SourceCounters",
}
# The rule behind each message: (section id, how the description starts, rule id), first
# match wins; an empty start matches any text. Built from the details CSV of the same
# captures, whose rule rows carry the id beside the same text (tests/test_text_reader.py
# checks every capture that has both forms).
_RULES: list[tuple[str, str, str]] = [
    ("SpeedOfLight", "", "SOLBottleneck"),
    ("SpeedOfLight_RooflineChart", "", "SOLFPRoofline"),
    ("PmSampling", "", "PMSamplingData"),
    ("ComputeWorkloadAnalysis", "", "HighPipeUtilization"),
    ("MemoryWorkloadAnalysis_Chart", "", "MemoryL2Compression"),
    ("MemoryWorkloadAnalysis_Tables", "The memory access pattern for shared",
     "SharedMemoryConflicts"),
    ("MemoryWorkloadAnalysis_Tables", "The memory access pattern for ", "MemoryCacheAccessPattern"),
    ("SchedulerStats", "", "IssueSlotUtilization"),
    ("WarpStateStats", "Instructions are executed in warps", "ThreadDivergence"),
    ("WarpStateStats", "", "CPIStall"),
    ("InstructionStats", "", "FPInstructions"),
    ("LaunchStats", "", "LaunchConfiguration"),
    ("Occupancy", "The difference between calculated theoretical", "AchievedOccupancy"),
    ("Occupancy", "The ", "TheoreticalOccupancy"),
    ("WorkloadDistribution", "", "WorkloadImbalance"),
    ("SourceCounters", "This kernel has uncoalesced global", "UncoalescedGlobalAccess"),
    ("SourceCounters", "This kernel has uncoalesced shared", "UncoalescedSharedAccess"),
    ("SourceCounters", "Sampling metrics were enabled", "PCSamplingData"),
]


def rule_id(section_id: str, description: str, index: int) -> str:
    """Name the ncu rule behind a message; unknown ones become ``<section id>.<index>``."""
    for section, start, rule in _RULES:
        if section == section_id and description.startswith(start):
            return rule
    return f"{section_id}.{index}"


def has_kernel_results(head: str) -> bool:
    """Whether text holds a kernel result: a ``[pid] process@host`` line, then a kernel line."""
    lines = head.splitlines()
    return any(PROCESS.match(line) and KERNEL.match(lines[i + 1].rstrip())
               for i, line in enumerate(lines[:-1]))


def looks_like_text_output(head: str) -> bool:
    """Whether the start of a file looks like ncu's plain-text output (or its log)."""
    return has_kernel_results(head) or any(
        line.startswith(("==PROF==", "==WARNING==", "==ERROR==")) for line in head.splitlines())


@dataclass
class _Launch:
    """What the text says about one launch, gathered line by line."""

    process_id: str
    process: str
    host: str
    match: re.Match
    nvtx: list[str] = field(default_factory=list)
    # (section, metric name or label, unit, value) as printed
    metrics: list[tuple[str, str, str, str]] = field(default_factory=list)
    rules: list[dict] = field(default_factory=list)
    complete: bool = True


@dataclass
class _Parse:
    """The state of one pass over the lines."""

    launches: list[_Launch] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # ==PROF==/==WARNING== lines
    kernel_warnings: dict[str, int] = field(default_factory=dict)
    other_tables: int = 0


def read_text_output(path: Path) -> Report:
    """Read ncu's plain-text output (a live run's log or ``ncu --import r.ncu-rep``).

    Raises:
        ReportParseError: the file is empty, not ncu's text output, or holds no kernel
            results (for example a log of ``==PROF==`` lines only).

    """
    raw = read_input_bytes(path)
    if not raw or raw.isspace():
        raise ReportParseError(f"{path}: file is empty")
    if b"\x00" in raw[:4096] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ReportParseError(f"{path}: binary data, not Nsight Compute text output")
    text = decode(raw, path)
    warnings: list[str] = []
    if not text.endswith("\n"):
        warnings.append(f"{path.name}: the file ends mid-line (truncated?)")
    lines = text.splitlines()
    if warnings:
        lines = lines[:-1]  # a cut line may hold half a value
    parsed = _parse(lines)
    if not parsed.launches:
        if parsed.messages:
            error = next((m for m in parsed.messages if m.startswith("==ERROR==")), None)
            raise ReportParseError(
                f"{path}: ncu's own messages only, no kernel results "
                + (f"(it says: {error[:200]})" if error else
                   "(with -o, the results are in the .ncu-rep: analyze that)"))
        raise ReportParseError(
            f"{path}: not Nsight Compute output (no '[pid] process@host' line followed by a "
            "kernel line such as '  name (1, 1, 1)x(32, 1, 1), Context 1, ...')")
    kept = [launch for launch in parsed.launches if launch.metrics]
    if len(kept) < len(parsed.launches):
        warnings.append(f"{path.name}: skipped {len(parsed.launches) - len(kept)} launch(es) "
                        "with no metric values (the file ends inside them?)")
    if not kept:
        other = (" (its tables are not Metric Name / Metric Unit / Metric Value tables: print "
                 "the details page)") if parsed.other_tables else ""
        raise ReportParseError(f"{path}: no launch in this text output has metric values{other}")
    if any(not launch.complete for launch in kept):
        warnings.append(f"{path.name}: a table ends without its closing ruler (truncated?); "
                        "its rows so far were read")
    if parsed.other_tables:
        warnings.append(f"{path.name}: skipped {parsed.other_tables} table(s) that are not "
                        "Metric Name / Metric Unit / Metric Value tables")
    report = _report(kept, path, warnings)
    report.launches["form"] = "text"
    report.session.update(_session_facts(parsed, len(parsed.launches)))
    report.warnings[:0] = warnings
    return report


def _parse(lines: list[str]) -> _Parse:
    """One pass over the lines: launches with their NVTX, tables and rule messages."""
    out = _Parse()
    process: tuple[str, str, str] | None = None
    launch: _Launch | None = None
    section = ""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i].rstrip()
        i += 1
        if not line.startswith(" "):
            m = PROCESS.match(line)
            if m:
                name, _, host = m[2].rpartition("@")
                process = (m[1], name or m[2], host if name else "")
                launch = None
            elif line.startswith("=="):
                out.messages.append(line)
            continue  # program output
        m = KERNEL.match(line)
        if m and process is not None:
            launch = _Launch(*process, match=m)
            out.launches.append(launch)
            section = ""
            continue
        if launch is None or not line.startswith("    "):
            continue
        body = line[4:]
        if body.startswith("Section: "):
            section = body[len("Section: "):].strip()
        elif body.startswith("Warning: "):
            out.kernel_warnings[body] = out.kernel_warnings.get(body, 0) + 1
        elif body.startswith("NVTX Push/Pop Stack for Thread"):
            i = _nvtx(lines, i, launch)
        elif _RULE_START.match(line):
            i = _rule(lines, i - 1, launch, section)
        elif _RULER.match(line) and i < n and not _RULE_START.match(lines[i].rstrip()):
            i = _table(lines, i - 1, launch, section, out)
    return out


def _nvtx(lines: list[str], i: int, launch: _Launch) -> int:
    """Read the push/pop stack: domains (6 spaces), ranges (8), messages (10)."""
    while i < len(lines) and lines[i].startswith("      "):
        m = _NVTX_RANGE.match(lines[i].strip())
        if m and lines[i].startswith("        ") and not lines[i].startswith("          "):
            launch.nvtx.append(m[1])
        i += 1
    return i


def _rule(lines: list[str], i: int, launch: _Launch, section: str) -> int:
    """Read one rule message: the type line, then continuation lines indented 10 spaces."""
    m = _RULE_START.match(lines[i].rstrip())
    kind, first = m[1], m[2].strip()
    i += 1
    speedup = _SPEEDUP.match(first)
    raw = [] if speedup else [lines[i - 1]]
    while i < len(lines) and lines[i].startswith(" " * 10) and lines[i].strip():
        raw.append(lines[i])
        i += 1
    launch.rules.append({
        "section": section, "type": kind, "description": _join_wrapped(raw),
        "speedup_type": (speedup[1] or "Global").lower() if speedup else None,
        "speedup": float(speedup[2]) if speedup else np.nan,
    })
    return i


def _join_wrapped(raw: list[str]) -> str:
    """Join a paragraph wrapped at a fixed width (lines padded with spaces to that width).

    A word longer than the width (a URL) is cut at the width: a line that fills the width
    without trailing padding continues on the next line with no space between.
    """
    if not raw:
        return ""
    width = max(len(line) for line in raw)
    padded = any(line != line.rstrip() for line in raw)
    text = raw[0][4:].strip()
    text = text[3:].strip() if text[:3] in ("OPT", "INF", "WRN", "ERR") else text
    for prev, line in zip(raw, raw[1:], strict=False):
        glue = "" if padded and len(prev) == width and not prev.endswith(" ") else " "
        text = f"{text}{glue}{line.strip()}" if text else line.strip()
    return text


def _spans(ruler: str) -> list[int]:
    """Start columns of the dash runs of a ruler line."""
    return [m.start() for m in re.finditer(r"-+", ruler)]


def _table(lines: list[str], i: int, launch: _Launch, section: str, out: _Parse) -> int:
    """Read a ruled table: ruler, header, ruler, rows, ruler. Returns the next line index."""
    ruler = lines[i].rstrip()
    starts = _spans(ruler)

    def cells(line: str) -> list[str]:
        bounds = [*starts[1:], None]
        return [line[a:b].strip() for a, b in zip(starts, bounds, strict=True)]

    header = cells(lines[i + 1]) if i + 1 < len(lines) else []
    i += 2
    if i < len(lines) and lines[i].rstrip() == ruler:
        i += 1
    is_metrics = header == _METRIC_HEADER
    if not is_metrics:
        out.other_tables += 1
    while i < len(lines):
        line = lines[i].rstrip()
        if line == ruler:
            return i + 1
        if not line.startswith("    ") or _RULE_START.match(line) or line[4:].startswith(
                "Section: "):
            break  # the table ended without its ruler: a cut file
        if is_metrics:
            name, unit, value = cells(line)
            launch.metrics.append((section, name, unit, value))
        i += 1
    launch.complete = False
    return i


def _report(launches: list[_Launch], path: Path, warnings: list[str]) -> Report:
    """Build the Report tables with the details CSV reader's conversions."""
    first = pd.DataFrame({
        "ID": [str(k) for k in range(len(launches))],
        "Process ID": [launch.process_id for launch in launches],
        "Process Name": [launch.process for launch in launches],
        "Host Name": [launch.host for launch in launches],
        "Kernel Name": [launch.match["name"] for launch in launches],
        "Grid Size": [f"({m[2]}, {m[3]}, {m[4]})" for m in (lt.match for lt in launches)],
        "Block Size": [f"({m[5]}, {m[6]}, {m[7]})" for m in (lt.match for lt in launches)],
    })
    attributes = [dict(_ATTRIBUTE.findall(launch.match["rest"])) for launch in launches]
    for column in ("Context", "Stream", "Device", "CC"):
        first[column] = [a.get(column) for a in attributes]
    table = launch_table(first, first.columns, path)
    table["nvtx"] = ["/".join(launch.nvtx) or None for launch in launches]

    rows = [(k, *row) for k, launch in enumerate(launches) for row in launch.metrics]
    frame = pd.DataFrame(rows, columns=["launch", "section", "name", "unit", "value"])
    label, metric = split_metric_names(frame["name"].astype("category"))
    values, units = unit_column(frame["value"], frame["unit"].astype("category"),
                                np.where(pd.isna(metric), label, metric), path, warnings)
    metrics = pd.DataFrame({
        "launch": frame["launch"].to_numpy(), "section": frame["section"].to_numpy(),
        "body_item": "", "metric": metric, "label": label, "unit": units, "value": values,
        "text": frame["value"].to_numpy(),
    })
    metrics = resolve_labels(metrics)[METRIC_COLUMNS]
    return finish_report(table, metrics, _rule_table(launches), path, warnings)


def _rule_table(launches: list[_Launch]) -> pd.DataFrame:
    """Ncu's rule messages with their rule ids recovered from section and text."""
    records = []
    for k, launch in enumerate(launches):
        for index, rule in enumerate(launch.rules):
            section_id = SECTION_IDS.get(rule["section"], rule["section"].replace(" ", ""))
            records.append({
                "launch": k, "section": section_id,
                "rule": rule_id(section_id, rule["description"], index), "type": rule["type"],
                "title": None, "description": rule["description"],
                "speedup_type": rule["speedup_type"], "speedup": rule["speedup"],
            })
    return pd.DataFrame(records, columns=RULE_COLUMNS)


def _session_facts(parsed: _Parse, n_launches: int) -> dict:
    """The ``==PROF==`` lines (as the CSV reader keeps a live preamble) and launch warnings."""
    messages = list(parsed.messages)
    messages += [f"{w} ({count} of {n_launches} launches)"
                 for w, count in parsed.kernel_warnings.items()]
    facts: dict = {}
    if messages:
        facts["ncu_messages"] = messages
    if any("unmodified GPU clocks" in m or "without fixed GPU frequencies" in m
           for m in messages):
        facts["clock_control"] = "none"
    return facts
