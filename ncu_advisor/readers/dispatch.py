"""Which reader reads a file, and one Report from many files.

Form detection by content (a head of the file, decompressed), folders walked, the files of one
capture merged (details + raw pages, source and session pages attached), launches of the same
kernel in several files merged, lean reading (only the metrics the analysis reads).
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import ReportNotFoundError, ReportParseError
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report
from .common import base_suffix, path_text, read_prefix
from .csv_export import read_csv_export
from .ncu_rep import is_report_head, read_ncu_rep
from .session_page import looks_like_session_page, read_session_page
from .source_page import attach_source_lines, empty_source_lines, is_source_page, read_source_page
from .text import has_kernel_results, looks_like_text_output, read_text_output

# Report files by name: Nsight Compute's own and the compressed one ncu 2026.3 writes.
REPORT_FILE_SUFFIXES = (".ncu-rep", ".ncu-repz")
# Enough of a file to tell its form: a live log's ==PROF== lines come first.
HEAD_BYTES = 65536
_CSV_HEADER = re.compile(r'^"(ID|Process ID)",', re.MULTILINE)
# Pages that describe a capture without launches: what to export instead when read alone.
_ALONE = {
    "session": "a --page session export holds only the capture's facts (command line, host, "
               "device); export the details or raw page to analyze it "
               "(ncu --import r.ncu-rep --csv --page details|raw)",
    "source": "a --page source export: per-line counters, read it together with the details or "
              "raw export of the same capture (ncu --import r.ncu-rep --csv --page details|raw)",
}
# Facts about the device and the session, taken from the first launch that has them.
SESSION_METRICS = {
    "gpu": "device__attribute_display_name",
    "sm_count": "device__attribute_multiprocessor_count",
    "sm_clock_hz": "smsp__cycles_elapsed.avg.per_second",
    "dram_clock_hz": "dram__cycles_elapsed.avg.per_second",
    "l2_bytes": "device__attribute_l2_cache_size",
    "memory_bus_width_bits": "device__attribute_global_memory_bus_width",
}


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """Return a file's first ``size`` bytes, decompressed (b"" if it will not decompress)."""
    return read_prefix(path, size)


def _decode_head(head: bytes) -> str:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell's UTF-16
        return head[: len(head) // 2 * 2].decode("utf-16", errors="replace")
    return head.decode("utf-8-sig", errors="replace")


def _form_by_content(text: str) -> str | None:
    """The form the first lines of a file show, or None when they show none."""
    start = text.lstrip()
    if start.startswith('"File Path",'):
        return "source"
    if start.startswith("/*") and "File Path:" in start[:200]:
        return "source-text"
    if looks_like_session_page(start):
        return "session"
    if _CSV_HEADER.search(text):
        return "csv"
    if looks_like_text_output(text):
        return "text"
    return None


def detect_form(path: Path, head: bytes) -> str:
    """Name the export form of a file from its name and first bytes.

    Returns one of ``ncu-rep``, ``csv`` (details, raw or summary page), ``text`` (ncu's
    plain-text output or its log), ``session`` / ``source`` (``--page session`` /
    ``--page source`` CSV exports) and ``source-text`` (``--page source`` without ``--csv``).
    """
    suffix = base_suffix(path)
    # By content first: a report gzipped or named otherwise is still a report; a .ncu-repz
    # (zstd, written by Nsight Compute 2026.3 by default) is known by its name.
    if suffix in REPORT_FILE_SUFFIXES or is_report_head(head):
        return "ncu-rep"
    text = _decode_head(head)
    form = _form_by_content(text)
    if suffix == ".csv" and form in (None, "text") and not has_kernel_results(text):
        return "csv"  # a live CSV's ==PROF== lines may fill the head; its reader decides
    if form is None and suffix in (".txt", ".log"):
        return "text"
    return form or "csv"  # anything else: the CSV reader says what is wrong with it


def looks_like_report(path: Path) -> bool:
    """Whether a file found in a folder is one to read.

    Every .csv and .ncu-rep, and the .txt/.log files whose content is ncu's output: folders
    also hold notes and program logs.
    """
    suffix = base_suffix(path)
    if suffix in (".csv", *REPORT_FILE_SUFFIXES):
        return True
    if suffix not in (".txt", ".log"):
        return False
    try:
        return _form_by_content(_decode_head(read_head(path))) is not None
    except OSError:
        return True  # let the reader say why it cannot be read


def _walk(folder: Path, problems: list[str] | None) -> list[Path]:
    """Every file under a folder; folders that cannot be listed are named in ``problems``."""
    def unreadable(exc: OSError) -> None:
        if problems is not None:
            problems.append(f"skipped {exc.filename}: cannot list folder "
                            f"({exc.strerror or exc})")

    found = []
    for root, dirs, names in os.walk(folder, onerror=unreadable):
        dirs.sort()
        found.extend(Path(root, n) for n in names)
    return found


def expand_paths(paths: Iterable[str | os.PathLike],
            problems: list[str] | None = None) -> list[tuple[Path, bool]]:
    """List the files to read; the flag says whether the file was found in a directory."""
    files: list[tuple[Path, bool]] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in _walk(path, problems) if f.is_file()
                           and looks_like_report(f))
            if not found:
                raise ReportParseError(f"{path}: directory holds no .csv or .ncu-rep reports "
                                       "(nor ncu text output)")
            files.extend((f, True) for f in found)
        elif path.is_file():
            files.append((path, False))
        elif path.exists():  # a FIFO, socket or device: reading it could block for ever
            raise ReportParseError(f"{path}: not a regular file")
        else:
            raise ReportNotFoundError(f"{path}: no such file or directory")
    if not files:
        raise ReportParseError("no input given")
    return files


def _read_source_page(path: Path) -> Report:
    """A ``--page source`` CSV export read on its own: facts only (its lines attach elsewhere)."""
    return Report(
        launches=pd.DataFrame(columns=LAUNCH_COLUMNS), metrics=pd.DataFrame(columns=METRIC_COLUMNS),
        ncu_rules=pd.DataFrame(columns=RULE_COLUMNS), sources=[path_text(path)])


# Readers that can keep only some metrics (``metrics=`` names), for lean reading.
_LEAN_READERS = (read_ncu_rep, read_csv_export, read_text_output)


def _read_form(path: Path, metrics: Iterable[str] | None = None,
               texts: Iterable[str] | None = None) -> tuple[str, Report]:
    """Read one file with the reader of its form; return the form too.

    ``metrics`` asks readers that can to keep only those metric names (launch facts are
    always read); ``texts``, the raw CSV reader to keep numbers' texts of those only.
    """
    if not path.is_file():
        raise ReportParseError(f"{path}: not a regular file")
    try:
        form = detect_form(path, read_head(path))
        if form == "source-text":
            raise ReportParseError(
                f"{path}: a --page source export in plain text (per-line counters); analyze "
                "the details or raw page (ncu --import r.ncu-rep --csv --page details|raw)")
        reader = {"ncu-rep": read_ncu_rep, "text": read_text_output,
                  "session": read_session_page, "source": _read_source_page}.get(
                      form, read_csv_export)
        lean = {"metrics": metrics} if metrics is not None and reader in _LEAN_READERS else {}
        if lean and texts is not None and reader is read_csv_export:
            lean["texts"] = texts
        return form, reader(path, **lean)
    except OSError as exc:  # permissions, I/O errors: a user's problem, one line
        raise ReportParseError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_one(path: Path, metrics: Iterable[str] | None = None) -> Report:
    """Read one file with the reader of its form (see :func:`detect_form`).

    Each reader checks its own content (empty file, report header, CSV header). A session or
    source page gives a Report without launches: facts to merge with a report of launches.
    ``metrics`` asks readers that can to keep only those metric names.
    """
    return _read_form(path, metrics)[1]


def _session(report: Report) -> dict:
    wide = report.wide()
    facts = dict(report.session)
    for key, metric in SESSION_METRICS.items():
        if key == "gpu":
            rows = np.flatnonzero((report.metrics["metric"] == metric).to_numpy())
            if len(rows):  # by position: a mask over the text column copies every text
                facts[key] = str(report.texts(rows[:1])[0])
        elif metric in wide.columns and wide[metric].notna().any():
            facts[key] = float(wide[metric].dropna().iloc[0])
    ccs = report.launches["cc"].dropna().astype(str).unique().tolist()
    if ccs:
        facts["cc"] = ccs[0] if len(ccs) == 1 else ccs
    return facts


_SAME_LAUNCH = ["process_id", "id", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                "block_z"]


def _merge_same_launches(report: Report) -> Report:
    """Treat one launch exported in several files (details + raw of one capture) as one.

    Two rows are the same launch when process ID, ncu ID, kernel name and shape agree: the
    process ID changes with every run, so separate runs never merge. Metrics of all copies
    are kept (the first copy's value wins in ``wide()``).
    """
    launches = report.launches
    keyed = launches.dropna(subset=["process_id", "id"])
    if keyed.empty or not keyed.duplicated(_SAME_LAUNCH).any():
        return report
    # Two launches of one file under one key are two launches (a repeated ID, kept apart by
    # the reader): the k-th of a file pairs with the k-th of another.
    keyed = keyed.assign(_nth=keyed.groupby([*_SAME_LAUNCH, "source"], dropna=False,
                                            sort=False).cumcount())
    key = [*_SAME_LAUNCH, "_nth"]
    if not keyed.duplicated(key).any():
        return report
    first = keyed.groupby(key, dropna=False, sort=False)["launch"].transform("min")
    remap = dict(zip(keyed["launch"], first, strict=True))
    keep = launches[~launches["launch"].isin([k for k, v in remap.items() if k != v])]
    # Fill what the first copy lacked (a raw export has no NVTX; a details one may). The
    # duration comes from the most precise copy: a details page prints 3 significant digits.
    precision = {"raw": 0, "ncu-rep": 0}
    rank = (launches["form"].map(precision).fillna(1) if "form" in launches
            else pd.Series(1, index=launches.index))
    for col in ("duration_ns", "nvtx"):
        donors = launches.assign(target=launches["launch"].map(remap), rank=rank).dropna(
            subset=[col])
        if col == "duration_ns":
            donors = donors.sort_values("rank", kind="stable")
        fill = keep["launch"].map(donors.drop_duplicates("target").set_index("target")[col])
        keep = keep.assign(**{col: keep[col].fillna(fill) if col == "nvtx"
                              else fill.fillna(keep[col])})
    metrics = report.metrics.assign(launch=report.metrics["launch"].replace(remap))
    rules = report.ncu_rules.assign(launch=report.ncu_rules["launch"].replace(remap))
    # The text form wraps descriptions, so the copies may differ in spacing.
    spacing = rules["description"].astype(str).str.split().str.join(" ")
    rules = rules[~rules.assign(_text=spacing).duplicated(["launch", "rule", "type", "_text"])]
    lines = report.source_lines.assign(launch=report.source_lines["launch"].replace(remap))
    # Renumber so launch numbers stay 0..n-1.
    order = {old: new for new, old in enumerate(keep["launch"])}
    session = {**report.session, "merged_launches": len(launches) - len(keep)}
    return Report(
        launches=keep.assign(launch=keep["launch"].map(order)).reset_index(drop=True),
        metrics=metrics.assign(launch=metrics["launch"].map(order)).reset_index(drop=True),
        ncu_rules=rules.assign(launch=rules["launch"].map(order)).reset_index(drop=True),
        session=session, sources=report.sources, warnings=report.warnings,
        source_lines=lines.assign(launch=lines["launch"].map(order)).reset_index(drop=True),
    )


def _malloc_trim():
    """Return the C library's ``malloc_trim`` (glibc; None elsewhere: macOS, musl, Windows)."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Hand the memory that reading freed back to the system.

    Arrow's allocator keeps the blocks of the streaming reader, and glibc the heap pages of
    freed arrays (its mmap threshold rises after the first large free): at 1 GB of raw
    export that was ~150 MB of resident memory holding nothing, under all the analysis adds.
    """
    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def read_report(paths: str | os.PathLike | Iterable[str | os.PathLike],
                progress: Callable[[int, int, Path], None] | None = None,
                metrics: Iterable[str] | None = None,
                texts: Iterable[str] | None = None) -> Report:
    """Read one or more exports (files or directories) into one Report.

    Args:
        paths: a path or a list of paths: ``.ncu-rep`` files, any CSV written by ``ncu --csv``
            or ``ncu --import ... --csv``, ncu's plain-text output, any of them gzipped, or
            directories holding them. A ``--page session`` export adds its facts to
            ``session``.
        progress: called as ``progress(done, total, path)`` before each file is read.
        metrics: keep only these metric names (None: all). ``ncu_advisor.analysis.metric_use.
            analysis_metrics()`` is what the analysis reads; a raw export of tens of
            thousands of launches then needs a fraction of the memory.
        texts: with ``metrics``, the metrics whose exported text a raw page keeps where it
            is a number (``metric_use.analysis_texts()``); other cells keep their text only
            where it is not a number (None: every text).

    Returns:
        The combined Report; ``launch`` numbers run over all inputs in order.

    Raises:
        ReportParseError: an input is missing, empty, or not an Nsight Compute export.

    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    parts, skipped, pages = [], [], []
    files = expand_paths(paths, skipped)
    metrics = None if metrics is None else frozenset(metrics)
    # A source page names no launch ID: it is attached to the launches read beside it.
    source_pages = [(p, d) for p, d in files if base_suffix(p) == ".csv" and is_source_page(p)]
    if source_pages:
        files = [f for f in files if f not in source_pages]
        if not files:
            raise ReportParseError(f"{source_pages[0][0]}: {_ALONE['source']}")
    for done, (path, from_dir) in enumerate(files):
        if progress is not None:
            progress(done, len(files), path)
        try:
            form, part = _read_form(path, metrics, texts)
        except ReportParseError as exc:
            if not from_dir:
                raise
            # Folders may hold other CSVs: skip what is not a report, and say so.
            skipped.append(f"skipped {exc}")
            continue
        if len(part.launches):
            parts.append(part)
            if len(parts) > _FOLD_PARTS:
                # A folder of thousands of small exports: each Report's frames cost ~0.3 MB
                # of pandas overhead whatever their rows (10,000 one-launch files held 3 GB);
                # folded into one as they come, memory follows the rows.
                parts = [_concat_parts(parts)]
        else:  # a session or source page: facts about launches read from other files
            pages.append((form, path, part))
    if not parts and pages:
        form, path, _ = pages[0]
        raise ReportParseError(f"{path}: {_ALONE.get(form, 'no profiled launches')}")
    if not parts:
        raise ReportParseError(f"no readable Nsight Compute report among the inputs ({skipped[0]})")
    folded = _concat_parts([*parts, *(part for _, _, part in pages)], list(skipped))
    report = Report(
        launches=folded.launches[LAUNCH_COLUMNS], metrics=folded.metrics,
        ncu_rules=folded.ncu_rules, session=folded.session, sources=folded.sources,
        warnings=folded.warnings, source_lines=folded.source_lines,
    )
    if len(parts) == 1 and "_wide" in parts[0].__dict__:
        report.set_wide(parts[0].wide())  # same launches and metrics, renumbered by 0
    report = _merge_same_launches(report)
    if source_pages:
        _attach_pages(report, source_pages)
    report.session.update(_session(report))
    report.launches["duration_ns"] = report.launches["duration_ns"].astype("float64")
    negative = report.launches["duration_ns"] < 0
    if negative.any():  # impossible: kept as not measured, never summed or saved against
        report.launches.loc[negative, "duration_ns"] = np.nan
        ids = report.launches.loc[negative, "id"].tolist()
        report.warnings.append(f"{int(negative.sum())} launch(es) with a negative duration "
                               f"(IDs {', '.join(map(str, ids[:5]))}"
                               f"{', ...' if len(ids) > 5 else ''}) are read as not measured")
    report.launches["invocations"] = (
        pd.to_numeric(report.launches["invocations"]).fillna(1).astype(np.int64))
    release_freed_memory()
    return report


# Reports of files read (a folder's) are folded into one past this many.
_FOLD_PARTS = 256


def _concat_parts(parts: list[Report], warnings: list[str] | None = None) -> Report:
    """Reports read one after another as one: launch numbers run on, facts first-wins.

    Parts without launches (session and source pages) add facts and warnings only.
    """
    launches, metrics, rules, lines = [], [], [], []
    session: dict = {}
    warnings = list(warnings or [])
    offset = 0
    for part in parts:
        if len(part.launches):
            launches.append(part.launches.assign(launch=part.launches["launch"] + offset))
            metrics.append(part.metrics if not offset
                           else part.metrics.assign(launch=part.metrics["launch"] + offset))
            rules.append(part.ncu_rules.assign(launch=part.ncu_rules["launch"] + offset))
            if not part.source_lines.empty:
                lines.append(part.source_lines.assign(
                    launch=part.source_lines["launch"] + offset))
            offset += len(part.launches)
    for part in parts:
        warnings.extend(part.warnings)
        for k, v in part.session.items():
            session.setdefault(k, v)
    nonempty = [r for r in rules if not r.empty]
    return Report(
        launches=pd.concat(launches, ignore_index=True),
        # One file's long table as it is: a concat copies it (~200 MB at 1 GB of export).
        metrics=metrics[0] if len(metrics) == 1 else pd.concat(metrics, ignore_index=True),
        ncu_rules=pd.concat(nonempty, ignore_index=True) if nonempty else parts[0].ncu_rules,
        session=session,
        sources=[s for p in parts for s in p.sources],
        warnings=warnings,
        source_lines=pd.concat(lines, ignore_index=True) if lines else empty_source_lines(),
    )


def _attach_pages(report: Report, pages: list[tuple[Path, bool]]) -> None:
    """Read source page exports and attach their tables to the Report's launches."""
    read = []
    for path, from_dir in pages:
        try:
            read.append((path, read_source_page(path)))
        except ReportParseError as exc:
            if not from_dir:
                raise
            report.warnings.append(f"skipped {exc}")
            continue
        report.sources.append(path_text(path))
    attached, warnings = attach_source_lines(report.launches, read)
    report.warnings.extend(warnings)
    if not attached.empty:
        report.source_lines = (attached if report.source_lines.empty else pd.concat(
            [report.source_lines, attached], ignore_index=True))
