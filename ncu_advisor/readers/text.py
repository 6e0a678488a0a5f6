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

import codecs
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import ReportParseError
from ..report import METRIC_COLUMNS, RULE_COLUMNS, Report
from .common import (
    DECIMAL_POINT,
    InputStream,
    NumberFormat,
    repeated_texts,
    told_format,
)

# The details CSV reader's building blocks: one conversion of launches, units and labels for
# both forms of the details page.
from .csv_export import (
    decode,
    finish_report,
    keep_metrics,
    launch_table,
    split_metric_names,
    unit_column,
    unknown_units_warning,
)
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
    # (section, metric name or label, unit, value) as printed, until the launch ends and
    # its rows move to the columns of :class:`_Rows`
    metrics: list[tuple[str, str, str, str]] = field(default_factory=list)
    # (section, type, description, speedup type, speedup): tuples, each distinct text
    # once (a dict per message was ~650 bytes, 400 MB at 1 GB of text)
    rules: list[tuple] = field(default_factory=list)
    complete: bool = True


class _Rows:
    """The metric rows of the launches read so far, converted block by block.

    A Python tuple of four strings per row was ~300 bytes; at 1 GB of text (5.8 M rows)
    they and the lines held whole took 9 GB. Each block of whole launches is converted
    (units, labels, lean selection) when it is full, so only the table kept grows: the
    table built whole at the end held transient copies of every row (2.6 GB at 1 GB).
    A block whose values do not tell the number format (``1,234`` only) waits, as Arrow
    columns, for one that does.
    """

    _BLOCK = 1 << 16  # rows gathered as Python strings (~300 B each) before they move

    def __init__(self, path: Path | None = None, wanted: Iterable[str] | None = None) -> None:
        self.path = path
        self.wanted = None if wanted is None else frozenset(wanted)
        self.frames: list[pd.DataFrame] = []  # converted blocks
        self._held: list[tuple[np.ndarray, dict[str, pa.Array]]] = []  # format not told
        self._fmt: NumberFormat | None = None
        self._seen: set[str] = set()  # metric names kept so far (keep_metrics' first rows)
        self._unknown: list[str] = []  # unknown-unit rows, for one warning
        self._pending: list[tuple[int, str, str, str, str]] = []

    def add(self, k: int, launch: _Launch) -> None:
        """Take the rows of kept launch number ``k``."""
        self._pending.extend((k, *row) for row in launch.metrics)
        launch.metrics = []
        if len(self._pending) >= self._BLOCK:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        k, *fields = zip(*self._pending, strict=True)
        self._pending = []
        launch = np.asarray(k, dtype=np.int64)
        # Names, units and sections repeat on every launch: one copy of each.
        columns = {name: (pa.array(values, type=pa.string()) if name == "value" else
                          pa.array(values, type=pa.string()).dictionary_encode())
                   for name, values in zip(_ROW_FIELDS, fields, strict=True)}
        del fields
        if self._fmt is None:
            self._fmt = told_format(columns["value"], str(self.path))
            if self._fmt is None:
                self._held.append((launch, columns))
                return
            self._convert_held()
        self.frames.append(self._convert(launch, columns))

    def _convert_held(self) -> None:
        held, self._held = self._held, []
        self.frames.extend(self._convert(launch, columns) for launch, columns in held)

    def _convert(self, launch_of: np.ndarray, columns: dict[str, pa.Array]) -> pd.DataFrame:
        """One block's rows in the long table (Report.metrics' columns), lean if asked."""
        names = columns["name"].to_pandas()  # categorical: one conversion per distinct name
        label, metric = split_metric_names(names)
        del names
        values, units = unit_column(columns["value"], columns["unit"].to_pandas(),
                                    np.where(pd.isna(metric), label, metric), self.path,
                                    fmt=self._fmt, unknown=self._unknown)
        metrics = pd.DataFrame({
            "launch": launch_of,
            "section": columns["section"].cast(pa.string()).to_pandas().array,
            "body_item": "", "metric": metric, "label": label, "unit": units,
            "value": values, "text": columns["value"].to_pandas().array,
        })
        return keep_metrics(resolve_labels(metrics)[METRIC_COLUMNS], self.wanted, self._seen)

    def finish(self, warnings: list[str]) -> pd.DataFrame:
        """The long table of every row; the unknown units' warning into ``warnings``."""
        self._flush()
        if self._held:  # no value told the format: the decimal point
            self._fmt = DECIMAL_POINT
            self._convert_held()
        if self._unknown:
            warnings.append(unknown_units_warning(self.path, self._unknown))
        if not self.frames:
            empty = np.empty(0, dtype=np.int64)
            self.frames.append(self._convert(empty, {
                name: pa.array([], type=pa.string()) if name == "value"
                else pa.array([], type=pa.string()).dictionary_encode()
                for name in _ROW_FIELDS}))
        frames, self.frames = self.frames, []
        if len(frames) == 1:
            return frames[0]
        out = pd.concat(frames, ignore_index=True)
        del frames
        return out


_ROW_FIELDS = ("section", "name", "unit", "value")


@dataclass
class _Parse:
    """The state of one pass over the lines."""

    launches: int = 0  # every launch seen, with metric values or not
    kept: list[_Launch] = field(default_factory=list)  # those with metric values
    rows: _Rows = field(default_factory=_Rows)  # given the path and metrics wanted
    messages: list[str] = field(default_factory=list)  # ==PROF==/==WARNING== lines
    kernel_warnings: dict[str, int] = field(default_factory=dict)
    other_tables: int = 0
    texts: dict[str, str] = field(default_factory=dict)  # one object per distinct text

    def done(self, launch: _Launch | None) -> None:
        """A launch ends: its rows go to the columns (one without rows is counted only)."""
        if launch is not None and launch.metrics:
            self.rows.add(len(self.kept), launch)
            self.kept.append(launch)


class _Lines:
    """Lines read one at a time with a look ahead (the parser's tables need one line)."""

    def __init__(self, lines) -> None:
        self._it = iter(lines)
        self._ahead: list[str] = []

    def next(self) -> str | None:
        """The next line (None at the end)."""
        if self._ahead:
            return self._ahead.pop()
        return next(self._it, None)

    def peek(self) -> str | None:
        """The next line, left to be read (None at the end)."""
        if not self._ahead:
            line = next(self._it, None)
            if line is None:
                return None
            self._ahead.append(line)
        return self._ahead[-1]


# Bytes decoded and split into lines at a time: the text is never held whole. Small: a
# piece's lines are ~3x its size as Python strings, and the memory they leave behind stays
# with the process (32 MiB pieces held ~150 MB more at 150 MB of text).
CHUNK_BYTES = 4 << 20


class _TextLines:
    """The lines of a text export, read and decoded in pieces of :data:`CHUNK_BYTES`.

    UTF-8, or UTF-16 with a BOM (PowerShell's ``>``), each piece cut after its last line
    end. After the lines are read: ``empty`` (no byte but white space) and ``cut`` (no
    final newline: the last line, which may hold half a value, is not given).
    """

    def __init__(self, path: Path) -> None:
        self.path, self.empty, self.cut = path, True, False

    def __iter__(self):
        with InputStream(self.path, None) as fh:
            data = fh.read(CHUNK_BYTES)
            if data.startswith((b"\xff\xfe", b"\xfe\xff")):
                text_of = self._utf16()
            elif b"\x00" in data[:4096]:
                raise ReportParseError(
                    f"{self.path}: binary data, not Nsight Compute text output")
            else:
                text_of = self._utf8()
            while True:
                eof = not data
                lines = self._lines(text_of(data, eof), eof)
                yield from lines
                del lines
                if eof:
                    return
                data = fh.read(CHUNK_BYTES)

    def _utf8(self) -> Callable[[bytes, bool], str]:
        """``(bytes read, at the end) -> the text of the whole lines read so far``.

        Cut before decoding: an error names its byte and offset in the file.
        """
        path, rest, offset = self.path, b"", 0

        def text_of(data: bytes, eof: bool) -> str:
            nonlocal rest, offset
            buf = rest + data
            cut = len(buf) if eof else buf.rfind(b"\n") + 1
            piece, rest = buf[:cut], buf[cut:]
            del buf
            if not piece:
                return ""
            self.empty = self.empty and piece.isspace()
            if not offset:
                text = decode(piece, path)  # a BOM, and the first piece's errors
            else:
                try:
                    text = piece.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ReportParseError(
                        f"{path}: not UTF-8 text (byte 0x{piece[exc.start]:02x} at offset "
                        f"{offset + exc.start}); re-export it with ncu --csv") from None
            offset += len(piece)
            return text
        return text_of

    def _utf16(self) -> Callable[[bytes, bool], str]:
        """As :meth:`_utf8`, decoded as read: a piece may end inside a character."""
        decoder, rest = codecs.getincrementaldecoder("utf-16")(), ""

        def text_of(data: bytes, eof: bool) -> str:
            nonlocal rest
            self.empty = self.empty and (eof or data.isspace())
            try:
                buf = rest + decoder.decode(data, final=eof)
            except UnicodeDecodeError as exc:
                raise ReportParseError(
                    f"{self.path}: broken UTF-16 text ({exc.reason})") from None
            cut = len(buf) if eof else buf.rfind("\n") + 1
            text, rest = buf[:cut], buf[cut:]
            return text
        return text_of

    def _lines(self, text: str, last: bool) -> list[str]:
        """A piece's lines; of the ``last`` piece, not a final line without its newline."""
        lines = text.splitlines()
        if last and text and not text.endswith("\n"):
            self.cut = not self.empty
            lines = lines[:-1]
        return lines


def read_text_output(path: Path, metrics: Iterable[str] | None = None) -> Report:
    """Read ncu's plain-text output (a live run's log or ``ncu --import r.ncu-rep``).

    The file is read in pieces and each launch's rows become columns when it ends, so
    memory follows the tables built, not the text. ``metrics``: the metric names to keep
    (None: all; rows of labels that name no known metric are kept too).

    Raises:
        ReportParseError: the file is empty, not ncu's text output, or holds no kernel
            results (for example a log of ``==PROF==`` lines only).

    """
    lines = _TextLines(path)
    parsed = _parse(lines, _Rows(path, metrics))
    if lines.empty:
        raise ReportParseError(f"{path}: file is empty")
    warnings: list[str] = []
    if lines.cut:
        warnings.append(f"{path.name}: the file ends mid-line (truncated?)")
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
    kept = parsed.kept
    if len(kept) < parsed.launches:
        warnings.append(f"{path.name}: skipped {parsed.launches - len(kept)} launch(es) "
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
    report = _report(kept, parsed.rows, path, warnings)
    report.launches["form"] = "text"
    report.session.update(_session_facts(parsed, parsed.launches))
    report.warnings[:0] = warnings
    return report


def _parse(lines, rows: _Rows | None = None) -> _Parse:
    """One pass over the lines: launches with their NVTX, tables and rule messages."""
    out = _Parse() if rows is None else _Parse(rows=rows)
    src = _Lines(lines)
    process: tuple[str, str, str] | None = None
    launch: _Launch | None = None
    section = ""
    while (raw := src.next()) is not None:
        line = raw.rstrip()
        if not line.startswith(" "):
            m = PROCESS.match(line)
            if m:
                name, _, host = m[2].rpartition("@")
                process = (m[1], name or m[2], host if name else "")
                out.done(launch)
                launch = None
            elif line.startswith("=="):
                out.messages.append(line)
            continue  # program output
        m = KERNEL.match(line)
        if m and process is not None:
            out.done(launch)
            launch = _Launch(*process, match=m)
            out.launches += 1
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
            _nvtx(src, launch)
        elif _RULE_START.match(line):
            _rule(src, raw, launch, section, out.texts)
        elif _RULER.match(line) and (ahead := src.peek()) is not None \
                and not _RULE_START.match(ahead.rstrip()):
            _table(src, line, launch, section, out)
    out.done(launch)
    return out


def _nvtx(src: _Lines, launch: _Launch) -> None:
    """Read the push/pop stack: domains (6 spaces), ranges (8), messages (10)."""
    while (line := src.peek()) is not None and line.startswith("      "):
        src.next()
        m = _NVTX_RANGE.match(line.strip())
        if m and line.startswith("        ") and not line.startswith("          "):
            launch.nvtx.append(m[1])


def _rule(src: _Lines, first_line: str, launch: _Launch, section: str,
          texts: dict[str, str]) -> None:
    """Read one rule message: the type line, then continuation lines indented 10 spaces."""
    m = _RULE_START.match(first_line.rstrip())
    kind, first = m[1], m[2].strip()
    speedup = _SPEEDUP.match(first)
    raw = [] if speedup else [first_line]
    while (line := src.peek()) is not None and line.startswith(" " * 10) and line.strip():
        raw.append(src.next())
    description = _join_wrapped(raw)
    launch.rules.append((
        texts.setdefault(section, section), texts.setdefault(kind, kind),
        texts.setdefault(description, description),
        (speedup[1] or "Global").lower() if speedup else None,
        float(speedup[2]) if speedup else np.nan,
    ))


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


def _table(src: _Lines, ruler: str, launch: _Launch, section: str, out: _Parse) -> None:
    """Read a ruled table (its first ruler read): header, ruler, rows, ruler."""
    starts = _spans(ruler)

    def cells(line: str) -> list[str]:
        bounds = [*starts[1:], None]
        return [line[a:b].strip() for a, b in zip(starts, bounds, strict=True)]

    head = src.next()
    header = cells(head) if head is not None else []
    if (line := src.peek()) is not None and line.rstrip() == ruler:
        src.next()
    is_metrics = header == _METRIC_HEADER
    if not is_metrics:
        out.other_tables += 1
    while (raw := src.peek()) is not None:
        line = raw.rstrip()
        if line == ruler:
            src.next()
            return
        if not line.startswith("    ") or _RULE_START.match(line) or line[4:].startswith(
                "Section: "):
            break  # the table ended without its ruler: a cut file (the line is read again)
        src.next()
        if is_metrics:
            name, unit, value = cells(line)
            launch.metrics.append((section, name, unit, value))
    launch.complete = False


def _report(launches: list[_Launch], rows: _Rows, path: Path, warnings: list[str]) -> Report:
    """Build the Report tables with the details CSV reader's conversions.

    The metric rows are converted already, block by block (:class:`_Rows`).
    """
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

    metrics = rows.finish(warnings)
    return finish_report(table, metrics, _rule_table(launches), path, warnings)


def _rule_table(launches: list[_Launch]) -> pd.DataFrame:
    """Ncu's rule messages with their rule ids recovered from section and text.

    Built column by column: a dict per message was ~400 bytes, 260 MB for the 653,136
    messages of 1 GB of text.
    """
    columns: dict[str, list] = {c: [] for c in RULE_COLUMNS}
    ids: dict[tuple[str, str, int], str] = {}  # rule_id per (section, description, index)
    for k, launch in enumerate(launches):
        for index, (section, kind, description, speedup_type, speedup) in enumerate(
                launch.rules):
            section_id = SECTION_IDS.get(section, section.replace(" ", ""))
            key = (section_id, description, index)
            rule = ids.get(key)
            if rule is None:
                rule = ids[key] = rule_id(section_id, description, index)
            columns["launch"].append(k)
            columns["section"].append(section_id)
            columns["rule"].append(rule)
            columns["type"].append(kind)
            columns["title"].append(None)
            columns["description"].append(description)
            columns["speedup_type"].append(speedup_type)
            columns["speedup"].append(speedup)
    if not columns["launch"]:
        return pd.DataFrame([], columns=RULE_COLUMNS)
    columns["description"] = repeated_texts(columns["description"])
    return pd.DataFrame(columns, columns=RULE_COLUMNS)


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
