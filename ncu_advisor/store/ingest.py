"""Adding reports to the store: reading, analysing, de-duplicating by content, committing."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis import Analysis, analyze
from ..errors import ReportParseError, StoreError
from ..readers import expand_paths, read_report
from ..readers.common import read_input_bytes
from ..report import Report

if TYPE_CHECKING:
    pass
try:  # POSIX; Windows locks through msvcrt
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None
from .layout import (
    GROUP_MODES,
    INDEX,
    PART,
    commit_staged,
    create_store,
    is_complete,
    partition_name,
    stage_tables,
    staging_folder,
    unstage_tables,
)
from .tables import report_id_for, report_tables

_LABEL_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")


def add_report(store: str | os.PathLike, report: Report, analysis: Analysis | None = None, *,
               source: str, content_hash: str, labels: Mapping[str, str] | None = None,
               file_hashes: list[str] | None = None) -> str | None:
    """Add one already-read report to a store (created if needed).

    Args:
        store: the store folder.
        report: the report, as :func:`ncu_advisor.read_report` returned it.
        analysis: its analysis (computed here when not given).
        source: where it came from, stored as ``reports.source``.
        content_hash: a hash of its content: the report's identity in the store.
        labels: user labels (``{"commit": "abc123"}``).
        file_hashes: hashes of the files it was read from (default: ``[content_hash]``).

    Returns:
        The new report id, or None when the store already holds this content.

    """
    root = create_store(store)
    analysis = analysis if analysis is not None else analyze(report)
    report_id = report_id_for(content_hash)
    if is_complete(root, report_id):
        return None
    tables = report_tables(report, analysis, source=source, content_hash=content_hash,
                           file_hashes=file_hashes, labels=labels)
    with staging_folder(root) as stage:
        stage_tables(stage, report_id, tables)
        added = commit_staged(root, stage, {report_id: file_hashes or [content_hash]})
    return added[0] if added else None


@dataclass
class IngestedReport:
    """One report an ingest added."""

    report_id: str
    source: str
    launches: int
    findings: int


@dataclass
class IngestResult:
    """What an ingest did: reports added, inputs already in the store, warnings."""

    added: list[IngestedReport] = field(default_factory=list)
    already: list[tuple[str, str]] = field(default_factory=list)  # (path, report_id)
    warnings: list[str] = field(default_factory=list)


def parse_labels(items: Iterable[str] | None) -> dict[str, str]:
    """Parse ``KEY=VALUE`` labels (``--label commit=abc123``).

    Raises:
        StoreError: an item has no ``=`` or a key with characters other than letters,
            digits, ``_``, ``.`` and ``-``.

    """
    labels: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _LABEL_KEY.match(key):
            raise StoreError(f"label {item!r} is not KEY=VALUE (key: letters, digits, _ . -)")
        labels[key] = value
    return labels


def file_hash(path: Path) -> str:
    """SHA-256 of a file's content (decompressed: ``x.csv`` and ``x.csv.gz`` are one report)."""
    try:
        return hashlib.sha256(read_input_bytes(path)).hexdigest()
    except OSError as exc:
        raise ReportParseError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _stored_as(root: Path, digest: str) -> str | None:
    """The report a file (by its hash) was ingested into, if any."""
    entry = root / INDEX / digest
    if entry.is_file():
        return entry.read_text(encoding="utf-8").strip() or None
    report_id = report_id_for(digest)  # a file ingested alone (or an index entry lost)
    return report_id if is_complete(root, report_id) else None


def _stored_labels(root: Path, report_id: str) -> dict[str, str]:
    """The labels a stored report was given when it was added."""
    import pyarrow.parquet as pq

    path = root / "reports" / partition_name(report_id) / PART
    try:
        rows = pq.read_table(path, columns=["labels"]).column("labels").to_pylist()
    except (OSError, KeyError, ValueError):  # an index entry for a report folded into another
        return {}
    return {str(k): str(v) for k, v in (rows[0] or [])} if rows else {}


def _launch_keys(report: Report) -> set[tuple]:
    """Keys that identify a launch across exports of one capture (as read_report merges them).

    The process ID changes with every run, so exports of different runs never share a key.
    """
    cols = ["process_id", "id", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
            "block_z"]
    keyed = report.launches.dropna(subset=["process_id", "id"])
    return {tuple(str(v) for v in row) for row in keyed[cols].itertuples(index=False)}


@dataclass
class _Pending:
    """A report read and staged in this ingest, not committed yet."""

    paths: list[Path]
    hashes: list[str]
    keys: set[tuple]
    report_id: str
    launches: int
    findings: int


def ingest(store: str | os.PathLike, paths: Iterable[str | os.PathLike],
           labels: Mapping[str, str] | None = None, group: str = "capture",
           progress: Callable[[int, int, Path], None] | None = None) -> IngestResult:
    """Read reports into a store (created if needed); files already in it are skipped.

    Each file given, or found in a folder given, becomes one report, except that with
    ``group="capture"`` (the default) CSV exports of one capture given together (the raw and
    the details page of one run) become one report, as :func:`read_report` merges them: files
    that share a launch (same process ID, ncu ID, kernel and shape) are one run. A
    ``.ncu-rep`` is a report of its own (its reader gives no process ID to match).

    All or nothing: every report is staged first and committed at the end, so an input that
    fails to read leaves the store as it was. Files in folders that are not reports are
    skipped with a warning, as ``analyze`` skips them.

    Args:
        store: the store folder.
        paths: report files and folders.
        labels: labels given to every report added (``{"commit": "abc123"}``).
        group: ``capture`` or ``file`` (each file is a report of its own).
        progress: called as ``progress(done, total, path)`` before each file is read.

    Returns:
        The reports added, the inputs already stored, and warnings.

    Raises:
        ReportParseError: an input given by name is missing or not a report.
        StoreError: the folder is not a store.

    """
    if group not in GROUP_MODES:
        raise StoreError(f"unknown --group {group!r}; use one of {', '.join(GROUP_MODES)}")
    labels = dict(labels or {})
    paths = list(paths)
    files = expand_paths(paths)
    new_store = not Path(store).exists()
    root = create_store(store)
    try:
        return _ingest(root, files, paths, labels, group, progress)
    except ReportParseError:
        if new_store:  # nothing was added: leave no empty store behind
            import shutil

            shutil.rmtree(root, ignore_errors=True)
        raise


def _ingest(root: Path, files, paths, labels, group, progress) -> IngestResult:
    result = IngestResult()
    from ..rules_engine.loader import load_rules

    rules = load_rules(None)
    seen: set[str] = set()
    pending: list[_Pending] = []
    with staging_folder(root) as stage:
        for done, (path, from_dir) in enumerate(files):
            if progress is not None:
                progress(done, len(files), path)
            digest = file_hash(path)
            stored_as = _stored_as(root, digest)
            if stored_as is not None:
                result.already.append((str(path), stored_as))
                stored = _stored_labels(root, stored_as)
                differ = {k: v for k, v in labels.items() if stored.get(k) != v}
                if differ:
                    given = ", ".join(f"{k}={v}" for k, v in differ.items())
                    kept = ", ".join(f"{k}={v}" for k, v in stored.items()) or "none"
                    result.warnings.append(
                        f"{path}: already in the store as {stored_as} with label(s) {kept}; "
                        f"{given} not applied (labels are set when a report is first added)")
                continue
            if digest in seen:  # the same content given twice in one call
                continue
            try:
                report = read_report([path])
            except ReportParseError as exc:
                if not from_dir:
                    raise
                result.warnings.append(f"skipped {exc}")
                continue
            seen.add(digest)
            members, hashes = [path], [digest]
            keys = _launch_keys(report) if group == "capture" else set()
            joined = [p for p in pending if keys & p.keys]
            if joined:
                # Another export of a capture read earlier: read them together, as analyze would.
                for p in joined:
                    unstage_tables(stage, p.report_id)
                    pending.remove(p)
                    keys |= p.keys
                members = [m for p in joined for m in p.paths] + members
                hashes = [h for p in joined for h in p.hashes] + hashes
                report = read_report(members)
            content_hash = (hashes[0] if len(hashes) == 1 else hashlib.sha256(
                "\n".join(sorted(hashes)).encode()).hexdigest())
            report_id = report_id_for(content_hash)
            analysis = analyze(report, rules=rules)
            source = ", ".join(str(m) for m in members)
            stage_tables(stage, report_id, report_tables(
                report, analysis, source=source, content_hash=content_hash,
                file_hashes=hashes, labels=labels))
            result.warnings.extend(report.warnings)
            pending.append(_Pending(members, hashes, keys, report_id,
                                    int(report.launches["invocations"].sum()),
                                    len(analysis.findings)))
        if not pending and not result.already:
            skipped = len(result.warnings)
            raise ReportParseError(
                "nothing to ingest: no report could be read from "
                f"{', '.join(str(p) for p in paths)}"
                + (f" ({skipped} file(s) skipped: {result.warnings[0]})" if skipped else ""))
        added = set(commit_staged(root, stage, {p.report_id: p.hashes for p in pending}))
    for p in pending:
        source = ", ".join(str(m) for m in p.paths)
        if p.report_id in added:
            result.added.append(IngestedReport(p.report_id, source, p.launches, p.findings))
        else:
            result.already.append((source, p.report_id))
    return result
