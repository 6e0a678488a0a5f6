"""The report store: many runs as one hive-partitioned Parquet dataset, queried with DuckDB.

Layout (``docs/store.md`` and the README's "Many runs" section document it for other engines)::

    STORE/
      ncu-advise-store.json           format marker and schema_version
      reports/report_id=r.../part-0.parquet      one row per report: source, hashes, GPU, labels
      launches/report_id=r.../part-0.parquet     Report.launches
      metrics/report_id=r.../part-0.parquet      Report.metrics (long: one row per metric value)
      ncu_rules/report_id=r.../part-0.parquet    Report.ncu_rules
      quantities/report_id=r.../part-0.parquet   key derived quantities and bound, per launch
      findings/report_id=r.../part-0.parquet     the analysis' findings

``report_id`` lives in the folder name only (as Spark, pyarrow and Dask write hive partitions)
and joins every table; within a report, ``launch`` joins launches, metrics, ncu_rules,
quantities and findings. A report's ``reports`` partition is written last: a report exists
when its ``reports`` partition does.

Writes are atomic per ingest: every table is staged in ``STORE/.staging/`` and renamed into
place under an exclusive lock (``STORE/.lock``), so a failed ingest leaves the store as it was
and two ingests at once never interleave.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import __version__
from .analysis import KEY_QUANTITIES, Analysis, analyze
from .errors import ReportParseError, StoreError
from .readers import _expand, read_report
from .readers.common import read_input_bytes
from .report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report

if TYPE_CHECKING:
    import duckdb

try:  # POSIX; Windows locks through msvcrt
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None
    import msvcrt

STORE_SCHEMA_VERSION = 1
MARKER = "ncu-advise-store.json"
JOURNAL = ".committing"  # the reports a commit in progress is renaming into place
INDEX = "_index/files"  # per ingested file: a small file named by its hash, holding its report
PART = "part-0.parquet"
# The reports table is committed last: its partition marks a report complete.
DATA_TABLES = ("launches", "metrics", "ncu_rules", "quantities", "findings")
TABLES = ("reports", *DATA_TABLES)

_STR, _INT, _FLOAT = pa.string(), pa.int64(), pa.float64()
_TS = pa.timestamp("us", tz="UTC")
_LAUNCH_TYPES = {
    "launch": _INT, "id": _INT, "process_id": _INT, "grid_x": _INT, "grid_y": _INT,
    "grid_z": _INT, "block_x": _INT, "block_y": _INT, "block_z": _INT, "device": _INT,
    "context": _INT, "stream": _INT, "duration_ns": _FLOAT, "invocations": _INT,
}
_METRIC_TYPES = {"launch": _INT, "value": _FLOAT, "minimum": _FLOAT, "maximum": _FLOAT}
_RULE_TYPES = {"launch": _INT, "speedup": _FLOAT}


def _schema(columns: Iterable[str], types: Mapping[str, pa.DataType]) -> pa.Schema:
    """Columns of a Report table, typed; any column without a type is text."""
    return pa.schema([(c, types.get(c, _STR)) for c in columns])


# Table schemas as stored in the files (report_id is the partition folder, not a column).
SCHEMAS: dict[str, pa.Schema] = {
    "reports": pa.schema([
        ("schema_version", pa.int32()), ("source", _STR), ("content_hash", _STR),
        ("file_hashes", pa.list_(_STR)), ("gpu", _STR), ("cc", _STR), ("ncu_version", _STR),
        ("captured_at", _TS), ("ingested_at", _TS), ("launch_count", _INT),
        ("kernel_count", _INT), ("total_duration_ns", _FLOAT), ("finding_count", _INT),
        ("labels", pa.map_(_STR, _STR)), ("session", _STR), ("warnings", pa.list_(_STR)),
        ("tool_version", _STR),
    ]),
    "launches": _schema(LAUNCH_COLUMNS, _LAUNCH_TYPES),
    "metrics": _schema([*METRIC_COLUMNS, "minimum", "maximum"], _METRIC_TYPES),
    "ncu_rules": _schema(RULE_COLUMNS, _RULE_TYPES),
    "quantities": pa.schema([("launch", _INT), ("bound", _STR), ("time_share_pct", _FLOAT),
                             *[(q, _FLOAT) for q in KEY_QUANTITIES if q != "duration_ns"]]),
    "findings": pa.schema([
        ("launch", _INT), ("kernel_id", _INT), ("short_name", _STR), ("rule", _STR),
        ("category", _STR), ("severity", _STR), ("confidence", _STR), ("title", _STR),
        ("advice", _STR), ("estimated_speedup_pct", _FLOAT), ("estimated_saving_ns", _FLOAT),
        ("demo", _STR), ("evidence", _STR), ("launch_ids", pa.list_(_INT)),
    ]),
}
GROUP_MODES = ("capture", "file")
_LABEL_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")


# ---------------------------------------------------------------------------------------------
# The store folder


def _marker(root: Path) -> dict | None:
    path = root / MARKER
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable store marker ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != "ncu-advise report store":
        raise StoreError(f"{path}: not an ncu-advise store marker")
    return data


def open_store(path: str | os.PathLike) -> Path:
    """Check that a folder is a report store this version can read; return its path.

    Raises:
        StoreError: the folder does not exist, is not a store, or has a newer schema.

    """
    root = Path(path)
    if not root.is_dir():
        raise StoreError(f"{root}: no such store (create one with `ncu-advise ingest ... "
                         f"--store {root}`)")
    data = _marker(root)
    if data is None:
        raise StoreError(f"{root}: not an ncu-advise store (no {MARKER})")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > STORE_SCHEMA_VERSION:
        raise StoreError(f"{root}: store schema_version {version!r} is newer than this "
                         f"ncu-advise reads ({STORE_SCHEMA_VERSION}); upgrade ncu-advise")
    return root


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold the store's exclusive lock: one commit (or repair) at a time, across processes."""
    with open(root / ".lock", "a+b") as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        else:  # pragma: no cover - Windows
            fh.seek(0)
            msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            else:  # pragma: no cover - Windows
                fh.seek(0)
                msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)


def _columns() -> dict[str, list[str]]:
    return {table: SCHEMAS[table].names for table in TABLES}


def _write_marker(root: Path, marker: dict) -> None:
    tmp = root / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, root / MARKER)


def _note_columns(root: Path) -> None:
    """Mark the store when this version writes other columns than the store began with.

    Readers then match columns by name over all files (DuckDB ``union_by_name``), which
    reads every file's footer; a store of one schema reads the first file's only.
    """
    marker = _marker(root) or {}
    if marker.get("columns") == _columns() or marker.get("mixed_columns"):
        return
    _write_marker(root, {**marker, "mixed_columns": True})


def create_store(path: str | os.PathLike) -> Path:
    """Create a store in a new or empty folder (an existing store is opened as is).

    Raises:
        StoreError: the folder holds other files, or cannot be created.

    """
    root = Path(path)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{root}: cannot create the store ({exc.strerror or exc})") from None
    if _marker(root) is not None:
        return open_store(root)
    with _locked(root):
        if _marker(root) is None:
            others = [p.name for p in root.iterdir() if p.name not in (".lock", ".staging")]
            if others:
                raise StoreError(f"{root}: folder is not empty and not an ncu-advise store "
                                 f"(holds {others[0]}); give a new or empty folder")
            for table in TABLES:
                (root / table).mkdir(exist_ok=True)
            _write_marker(root, {
                "format": "ncu-advise report store", "schema_version": STORE_SCHEMA_VERSION,
                "tables": list(TABLES), "partitioning": "hive: report_id",
                "created_by": f"ncu-advise {__version__}", "columns": _columns()})
    return open_store(root)


def _partition(report_id: str) -> str:
    return f"report_id={report_id}"


def report_ids(store: str | os.PathLike) -> list[str]:
    """The reports in a store (committed ones only), sorted."""
    root = open_store(store)
    return sorted(p.name.partition("=")[2] for p in (root / "reports").glob("report_id=*")
                  if (p / PART).is_file())


def _recover(root: Path) -> None:
    """Undo what an ingest killed while committing left behind (called under the lock).

    A commit lists its reports in the journal before renaming anything and removes the
    journal when done; data partitions are renamed before the ``reports`` one. So after a
    kill, a listed report without its ``reports`` partition is incomplete: remove its data.
    """
    journal = root / JOURNAL
    if not journal.is_file():
        return
    for report_id in journal.read_text(encoding="utf-8").split():
        name = _partition(report_id)
        if not (root / "reports" / name / PART).is_file():
            for table in TABLES:
                shutil.rmtree(root / table / name, ignore_errors=True)
    journal.unlink()


# ---------------------------------------------------------------------------------------------
# Report -> Arrow tables


def _column(values: pd.Series, typ: pa.DataType) -> pa.Array:
    """One column in its stored type: numbers coerced, texts as str, missing values null."""
    if pa.types.is_integer(typ):
        return pa.array(pd.to_numeric(values, errors="coerce").astype("Int64"), type=typ)
    if pa.types.is_floating(typ):
        return pa.array(pd.to_numeric(values, errors="coerce").astype("float64"), type=typ,
                        from_pandas=True)
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object)
    try:  # texts already (str / None / NaN): converted in Arrow's C++ code
        arr = pa.array(values, from_pandas=True)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_null(
                arr.type):
            return arr.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    obj = values.astype(object)  # numbers or mixed objects in a text column
    return pa.array([None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA
                     else str(v) for v in obj], type=typ)


def _table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """A pandas table in a stored schema (absent columns are null, extra ones dropped)."""
    n = len(frame)
    arrays = []
    for f in schema:
        if f.name in frame.columns:
            arrays.append(_column(frame[f.name].reset_index(drop=True), f.type))
        else:
            arrays.append(pa.nulls(n, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _finding_rows(analysis: Analysis) -> pa.Table:
    launches = analysis.report.launches.set_index("launch")
    rows = []
    for f in analysis.findings:
        kernel_id = short = None
        if f.launch is not None and f.launch in launches.index:
            row = launches.loc[f.launch]
            kernel_id = None if pd.isna(row["id"]) else int(row["id"])
            short = row["short_name"]
        rows.append({
            "launch": f.launch, "kernel_id": kernel_id, "short_name": short, "rule": f.rule,
            "category": f.category, "severity": f.severity, "confidence": f.confidence,
            "title": f.title, "advice": f.advice,
            "estimated_speedup_pct": f.estimated_speedup_pct,
            "estimated_saving_ns": f.estimated_saving_ns, "demo": f.demo,
            "evidence": json.dumps(dict(f.evidence), default=str),
            "launch_ids": [int(x) for x in (f.launch_ids or [])],
        })
    return pa.Table.from_pylist(rows, schema=SCHEMAS["findings"])


def _quantity_rows(analysis: Analysis) -> pa.Table:
    q = analysis.quantities
    frame = pd.DataFrame({"launch": q.index.to_numpy()})
    frame["bound"] = [analysis.rooflines[int(k)].bound if int(k) in analysis.rooflines else None
                      for k in q.index]
    for name in SCHEMAS["quantities"].names[2:]:
        frame[name] = q[name].to_numpy() if name in q.columns else np.nan
    return _table(frame, SCHEMAS["quantities"])


def _capture_time(session: Mapping) -> dt.datetime | None:
    """The capture time where the input recorded one (an ISO text or a Unix time)."""
    for key in ("captured_at", "capture_time", "start_time"):
        value = session.get(key)
        if value is None:
            continue
        try:
            if isinstance(value, int | float):
                stamp = dt.datetime.fromtimestamp(float(value), dt.UTC)
            else:
                stamp = dt.datetime.fromisoformat(str(value))
        except (ValueError, OverflowError, OSError):
            continue
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
    return None


def _report_row(report: Report, analysis: Analysis, source: str, content_hash: str,
                file_hashes: list[str], labels: Mapping[str, str],
                ingested_at: dt.datetime) -> pa.Table:
    session = report.session
    cc = session.get("cc")
    row = {
        "schema_version": STORE_SCHEMA_VERSION, "source": source, "content_hash": content_hash,
        "file_hashes": list(file_hashes), "gpu": session.get("gpu"),
        "cc": ",".join(map(str, cc)) if isinstance(cc, list) else cc,
        "ncu_version": session.get("ncu_version"), "captured_at": _capture_time(session),
        "ingested_at": ingested_at,
        "launch_count": int(report.launches["invocations"].sum()),
        "kernel_count": int(report.launches["short_name"].nunique()),
        "total_duration_ns": report.total_duration_ns, "finding_count": len(analysis.findings),
        "labels": sorted(labels.items()),
        "session": json.dumps(session, default=str, sort_keys=True),
        "warnings": list(report.warnings), "tool_version": __version__,
    }
    return pa.Table.from_pylist([row], schema=SCHEMAS["reports"])


def report_tables(report: Report, analysis: Analysis, *, source: str, content_hash: str,
                  file_hashes: list[str] | None = None, labels: Mapping[str, str] | None = None,
                  ingested_at: dt.datetime | None = None) -> dict[str, pa.Table]:
    """The six stored tables of one report, in their stored schemas (without ``report_id``)."""
    return {
        "reports": _report_row(report, analysis, source, content_hash,
                               file_hashes or [content_hash], labels or {},
                               ingested_at or dt.datetime.now(dt.UTC)),
        "launches": _table(report.launches, SCHEMAS["launches"]),
        "metrics": _table(report.metrics, SCHEMAS["metrics"]),
        "ncu_rules": _table(report.ncu_rules, SCHEMAS["ncu_rules"]),
        "quantities": _quantity_rows(analysis),
        "findings": _finding_rows(analysis),
    }


def report_id_for(content_hash: str) -> str:
    """The report id of some content: ``r`` and 16 hex digits of its hash.

    Derived from the content, so the same report gets the same id in every ingest (and two
    ingests of one file at once collide on one partition instead of adding it twice). The
    letter keeps engines that infer partition types (Spark, DuckDB, Dask) from reading an
    all-digit id as a number.
    """
    return "r" + content_hash[:16]


# ---------------------------------------------------------------------------------------------
# Writing: stage, then commit under the lock


def _staged(stage: Path, table: str, report_id: str) -> Path:
    """Where a table's partition of a report waits for its commit (flat: few folders to remove)."""
    return stage / f"{table}.{_partition(report_id)}"


def _stage(stage: Path, report_id: str, tables: Mapping[str, pa.Table]) -> None:
    for table, data in tables.items():
        folder = _staged(stage, table, report_id)
        folder.mkdir()
        pq.write_table(data, folder / PART, compression="zstd")


def _unstage(stage: Path, report_id: str) -> None:
    for table in TABLES:
        shutil.rmtree(_staged(stage, table, report_id), ignore_errors=True)


def _commit(root: Path, stage: Path, staged: Mapping[str, list[str]]) -> list[str]:
    """Rename staged reports into place under the lock; return the ids added (new ones).

    ``staged`` maps each staged report id to the hashes of its files (for the index). All or
    nothing: if a rename fails, the reports already moved are taken out again.
    """
    added: list[str] = []
    moved: list[Path] = []
    with _locked(root):
        _recover(root)
        _note_columns(root)
        journal = root / JOURNAL
        journal.write_text("\n".join(staged) + "\n", encoding="utf-8")
        try:
            for report_id in staged:
                name = _partition(report_id)
                if (root / "reports" / name / PART).is_file():
                    continue  # a concurrent ingest added the same content first
                for table in (*DATA_TABLES, "reports"):
                    target = root / table / name
                    os.rename(_staged(stage, table, report_id), target)
                    moved.append(target)
                added.append(report_id)
        except BaseException:
            for target in moved:
                shutil.rmtree(target, ignore_errors=True)
            journal.unlink(missing_ok=True)
            raise
        journal.unlink()
        # The index of ingested files only saves work (a file it lacks is read, then found
        # in the store by its report id), so it is written after the commit.
        index = root / INDEX
        index.mkdir(parents=True, exist_ok=True)
        for report_id in added:
            for digest in staged[report_id]:
                (index / digest).write_text(report_id, encoding="utf-8")
    return added


@contextlib.contextmanager
def _staging(root: Path) -> Iterator[Path]:
    """A private staging folder inside the store (same file system: renames are atomic)."""
    (root / ".staging").mkdir(exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f"ingest-{os.getpid()}-", dir=root / ".staging"))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


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
    if (root / "reports" / _partition(report_id) / PART).is_file():
        return None
    tables = report_tables(report, analysis, source=source, content_hash=content_hash,
                           file_hashes=file_hashes, labels=labels)
    with _staging(root) as stage:
        _stage(stage, report_id, tables)
        added = _commit(root, stage, {report_id: file_hashes or [content_hash]})
    return added[0] if added else None


# ---------------------------------------------------------------------------------------------
# Ingest


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
    return report_id if (root / "reports" / _partition(report_id) / PART).is_file() else None


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
    files = _expand(paths)
    root = create_store(store)
    result = IngestResult()
    from .rules_engine.loader import load_rules

    rules = load_rules(None)
    seen: set[str] = set()
    pending: list[_Pending] = []
    with _staging(root) as stage:
        for done, (path, from_dir) in enumerate(files):
            if progress is not None:
                progress(done, len(files), path)
            digest = file_hash(path)
            stored_as = _stored_as(root, digest)
            if stored_as is not None:
                result.already.append((str(path), stored_as))
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
                    _unstage(stage, p.report_id)
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
            _stage(stage, report_id, report_tables(
                report, analysis, source=source, content_hash=content_hash,
                file_hashes=hashes, labels=labels))
            result.warnings.extend(report.warnings)
            pending.append(_Pending(members, hashes, keys, report_id,
                                    int(report.launches["invocations"].sum()),
                                    len(analysis.findings)))
        added = set(_commit(root, stage, {p.report_id: p.hashes for p in pending}))
    for p in pending:
        source = ", ".join(str(m) for m in p.paths)
        if p.report_id in added:
            result.added.append(IngestedReport(p.report_id, source, p.launches, p.findings))
        else:
            result.already.append((source, p.report_id))
    return result


# ---------------------------------------------------------------------------------------------
# Reading: DuckDB views, named queries


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def connect(store: str | os.PathLike,
            tables: Iterable[str] | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per table over the store's Parquet files.

    Views: ``reports``, ``launches``, ``metrics``, ``ncu_rules``, ``quantities``, ``findings``
    (each with ``report_id`` first) and ``report_labels`` (``report_id``, ``key``, ``value``).

    Args:
        store: the store folder.
        tables: make views for these tables only (default: all); each view lists its
            table's files, so a query that names two tables need not list the other four.

    """
    import duckdb

    root = open_store(store)
    wanted = set(TABLES if tables is None else tables)
    if "report_labels" in wanted:
        wanted.add("reports")
    mixed = bool((_marker(root) or {}).get("mixed_columns"))
    con = duckdb.connect(":memory:")
    for table in TABLES:
        if table not in wanted:
            continue
        folder = root / table
        if next(folder.glob(f"report_id=*/{PART}"), None) is not None:
            pattern = _sql_text(str(folder / "report_id=*" / "*.parquet"))
            con.execute(
                f"CREATE VIEW {table} AS SELECT report_id, * EXCLUDE (report_id) FROM "
                f"read_parquet({pattern}, hive_partitioning = true, "
                f"hive_types = {{'report_id': VARCHAR}}, union_by_name = {str(mixed).lower()})")
        else:
            schema = pa.schema([("report_id", _STR), *SCHEMAS[table]])
            con.register(f"_empty_{table}", schema.empty_table())
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM _empty_{table}")
    if "reports" in wanted:
        con.execute("CREATE VIEW report_labels AS SELECT report_id, unnest(map_keys(labels)) "
                    "AS key, unnest(map_values(labels)) AS value FROM reports")
    return con


def _tables_named(sql: str) -> list[str]:
    """The store tables a query names (a word match: a false hit only costs a listing)."""
    return [t for t in (*TABLES, "report_labels")
            if re.search(rf"\b{t}\b", sql, flags=re.IGNORECASE)]


def query(store: str | os.PathLike, sql: str,
          params: Mapping[str, object] | None = None) -> pa.Table:
    """Run SQL on a store (DuckDB dialect) and return the result as an Arrow table.

    Raises:
        StoreError: the store is not one, or DuckDB rejected the query (its message).

    """
    import duckdb

    con = connect(store, _tables_named(sql))
    try:
        relation = con.sql(sql, params=dict(params) if params else None)
        if relation is None:  # a statement without a result (SET, CREATE VIEW ...)
            return pa.table({})
        # DuckDB 1.4 named it to_arrow_table (before: arrow(), which 2.0 turned into a reader).
        fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
        return fetch()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"query failed: {first}") from None
    finally:
        con.close()


@dataclass(frozen=True)
class NamedQuery:
    """A query shipped as a documented SQL file in ``ncu_advisor/queries/``."""

    name: str
    description: str
    params: dict[str, str | int | None]  # name -> default (None: required)
    param_docs: dict[str, str]
    sql: str


_PARAM = re.compile(r"^--\s*param\s+(\w+)\s*(?:=\s*(.*?))?\s*:\s*(.*)$")


def _typed(value: str) -> str | int:
    """A parameter value as DuckDB should see it: integers as numbers, the rest as text."""
    return int(value) if re.fullmatch(r"-?\d+", value.strip()) else value


@cache
def named_queries() -> dict[str, NamedQuery]:
    """The named queries shipped with ncu-advise, by name (the SQL file's stem)."""
    out = {}
    folder = resources.files("ncu_advisor").joinpath("queries")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        sql = entry.read_text(encoding="utf-8")
        description, params, docs = [], {}, {}
        for line in sql.splitlines():
            if not line.startswith("--"):
                break
            match = _PARAM.match(line)
            if match:
                name, default, doc = match.groups()
                params[name] = None if default is None else _typed(default)
                docs[name] = doc
            else:
                description.append(line[2:].strip())
        name = entry.name[:-4]
        out[name] = NamedQuery(name, " ".join(d for d in description if d), params, docs, sql)
    return out


def run_named(store: str | os.PathLike, name: str,
              params: Mapping[str, str | int] | None = None) -> pa.Table:
    """Run a named query with its parameters (defaults filled in).

    Raises:
        StoreError: unknown query or parameter, a required parameter missing, or the
            query failed.

    """
    queries = named_queries()
    if name not in queries:
        raise StoreError(f"no named query {name!r}; known: {', '.join(queries)}")
    q = queries[name]
    given = dict(params or {})
    unknown = sorted(set(given) - set(q.params))
    if unknown:
        raise StoreError(f"query {name!r} has no parameter {unknown[0]!r}; it takes "
                         f"{', '.join(q.params) or 'none'}")
    values = {}
    for key, default in q.params.items():
        value = given.get(key, default)
        if value is None:
            raise StoreError(f"query {name!r} needs --param {key}=... ({q.param_docs[key]})")
        values[key] = _typed(value) if isinstance(value, str) else value
    return query(store, q.sql, values)


# ---------------------------------------------------------------------------------------------
# Trend, and a stored report back as a Report


TREND_QUANTITIES = ("dram_pct", "sm_pct", "achieved_occupancy_pct")


def trend(store: str | os.PathLike, kernel: str | None = None,
          label: str | None = None) -> pd.DataFrame:
    """A kernel's (or the whole run's) GPU time and key quantities in each report, in order.

    Args:
        store: the store folder.
        kernel: a regular expression searched in the kernels' full names (None: every kernel,
            the whole run).
        label: order the reports by this label's value (numerically when every value is a
            number) and leave out reports without it; None orders by capture (else ingest)
            time.

    Returns:
        One row per report that has a matching launch: ``report_id``, ``label_value``, ``at``,
        ``launches``, ``kernels``, ``total_ns``, ``change_pct`` (against the previous row),
        time-weighted ``dram_pct``, ``sm_pct``, ``achieved_occupancy_pct``, ``dram_bytes``
        and ``findings``.

    """
    if kernel:
        try:
            re.compile(kernel)
        except re.error as exc:
            raise StoreError(f"--kernel {kernel!r} is not a regular expression ({exc})") from None
    table = run_named(store, "trend", {"kernel": kernel or ".", "label": label or ""})
    frame = table.to_pandas()
    frame["change_pct"] = 100.0 * (frame["total_ns"] / frame["total_ns"].shift(1) - 1.0)
    return frame


def _select_report(store: str | os.PathLike, label_filter: Mapping[str, str] | None,
                   report_id: str | None) -> pd.Series:
    conditions, params = [], {}
    for i, (key, value) in enumerate((label_filter or {}).items()):
        conditions.append(f"labels[$k{i}] = $v{i}")
        params[f"k{i}"], params[f"v{i}"] = key, value
    if report_id is not None:
        conditions.append("report_id = $rid")
        params["rid"] = report_id
    where = " AND ".join(conditions) or "TRUE"
    sql = ("SELECT report_id, source, session, coalesce(captured_at, ingested_at) AS report_time "
           f"FROM reports WHERE {where} ORDER BY report_time DESC, report_id")
    rows = query(store, sql, params).to_pandas()
    if rows.empty:
        wanted = ", ".join([f"{k}={v}" for k, v in (label_filter or {}).items()]
                           + ([f"report_id={report_id}"] if report_id else []))
        raise StoreError(f"{store}: no report in the store matches {wanted or 'anything'}")
    return rows.iloc[0]


def _frame(table: pa.Table, ints: Iterable[str] = ()) -> pd.DataFrame:
    frame = table.to_pandas()
    for col in ints:
        if col in frame.columns:
            frame[col] = frame[col].astype("Int64")
    return frame


def load_report(store: str | os.PathLike,
                label_filter: Mapping[str, str] | str | Iterable[str] | None = None,
                report_id: str | None = None) -> Report:
    """Rebuild a stored report as a :class:`Report` (what :func:`ncu_advisor.analyze` takes).

    Args:
        store: the store folder.
        label_filter: labels the report must carry: a mapping (``{"branch": "main"}``),
            one ``"KEY=VALUE"`` text or a list of them (repeated ``--baseline-label``); when
            several reports match, the latest (capture time, else ingest time) is taken.
        report_id: a report id (``r`` + 16 hex digits), alone or with labels.

    Returns:
        The report: launches, metrics and ncu_rules as stored, its session facts, and
        ``sources`` naming the files it was ingested from.

    Raises:
        StoreError: no report matches, or the folder is not a store.

    """
    if isinstance(label_filter, str):
        label_filter = parse_labels([label_filter])
    elif label_filter is not None and not isinstance(label_filter, Mapping):
        label_filter = parse_labels(label_filter)
    root = open_store(store)
    chosen = _select_report(root, label_filter, report_id)
    name = _partition(chosen["report_id"])

    def read(table: str) -> pa.Table:
        return pq.read_table(root / table / name / PART)

    launches = _frame(read("launches"), [c for c, t in _LAUNCH_TYPES.items()
                                         if t == _INT and c not in ("launch", "invocations")])
    for col in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
        launches[col] = launches[col].astype("Int64")
    launches["invocations"] = launches["invocations"].fillna(1).astype(np.int64)
    metrics = read("metrics").to_pandas()
    if metrics["minimum"].isna().all() and metrics["maximum"].isna().all():
        metrics = metrics.drop(columns=["minimum", "maximum"])
    session = json.loads(chosen["session"]) if chosen["session"] else {}
    return Report(launches=launches[LAUNCH_COLUMNS], metrics=metrics,
                  ncu_rules=read("ncu_rules").to_pandas(), session=session,
                  sources=str(chosen["source"]).split(", "), warnings=[])
