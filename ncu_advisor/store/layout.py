"""The store's folder: its marker, locking, and the commit protocol.

Tables are staged in ``.staging/`` and renamed into place: the ``reports`` partition first,
its row saying ``complete = false``, then the data partitions, then the row again saying
``complete = true`` (one file replaced in place). A reader of the partitions that keeps the
reports whose row is complete (and joins the data tables to them) never counts a report
half written, even one an ingest killed mid-commit left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from .._version import __version__
from ..errors import StoreError
from ..processes import alive

if TYPE_CHECKING:
    pass
try:  # POSIX; Windows locks through msvcrt
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None
    import msvcrt
from .tables import SCHEMAS, STORE_SCHEMA_VERSION

MARKER = "ncu-advise-store.json"


JOURNAL = ".committing"  # the reports a commit in progress is renaming into place


INDEX = "_index/files"  # per ingested file: a small file named by its hash, holding its report


PART = "part-0.parquet"


# The reports partition is renamed in first (complete = false) and marked complete last.
DATA_TABLES = ("launches", "metrics", "ncu_rules", "quantities", "findings")


TABLES = ("reports", *DATA_TABLES)


GROUP_MODES = ("capture", "file")


def read_marker(root: Path) -> dict | None:
    """The store's marker file as a dict (None when there is none)."""
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
    data = read_marker(root)
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
    marker = read_marker(root) or {}
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
    if read_marker(root) is not None:
        return open_store(root)
    with _locked(root):
        if read_marker(root) is None:
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


def partition_name(report_id: str) -> str:
    """The hive partition folder name of a report."""
    return f"report_id={report_id}"


def is_complete(root: Path, report_id: str) -> bool:
    """Whether a report is in the store: its ``reports`` row is there and says complete.

    Rows written before the flag existed (no ``complete`` column, or null) were renamed in
    last, after their data: present means complete.
    """
    path = root / "reports" / partition_name(report_id) / PART
    if not path.is_file():
        return False
    try:
        table = pq.read_table(path)
    except (OSError, ValueError, pa.ArrowException):
        return False  # a file being replaced, or damaged: not a report to count
    if "complete" not in table.column_names:
        return True
    return all(v is not False for v in table.column("complete").to_pylist())


def report_ids(store: str | os.PathLike) -> list[str]:
    """The reports in a store (committed ones only), sorted."""
    root = open_store(store)
    ids = (p.name.partition("=")[2] for p in (root / "reports").glob("report_id=*"))
    return sorted(i for i in ids if is_complete(root, i))


def _recover(root: Path) -> None:
    """Undo what an ingest killed while committing left behind (called under the lock).

    A commit lists its reports in the journal before renaming anything and removes the
    journal when done; a report's row says complete only once all its partitions are in
    place. So after a kill, a listed report that is not complete is removed (every table).
    """
    journal = root / JOURNAL
    if not journal.is_file():
        return
    for report_id in journal.read_text(encoding="utf-8").split():
        name = partition_name(report_id)
        if not is_complete(root, report_id):
            for table in TABLES:
                shutil.rmtree(root / table / name, ignore_errors=True)
    journal.unlink()


def _staged(stage: Path, table: str, report_id: str) -> Path:
    """Where a table's partition of a report waits for its commit (flat: few folders to remove)."""
    return stage / f"{table}.{partition_name(report_id)}"


def _staged_complete(stage: Path, report_id: str) -> Path:
    """The ``reports`` row saying complete, staged beside the partitions."""
    return stage / f"reports.{partition_name(report_id)}.complete.parquet"


def stage_tables(stage: Path, report_id: str, tables: Mapping[str, pa.Table]) -> None:
    """Write a report's tables into the staging folder.

    The ``reports`` partition is staged with ``complete = false``; the row with ``true``
    waits beside it for the end of the commit.
    """
    for table, data in tables.items():
        folder = _staged(stage, table, report_id)
        folder.mkdir()
        if table == "reports" and "complete" in data.column_names:
            at = data.column_names.index("complete")
            field = data.schema.field(at)
            pq.write_table(data, _staged_complete(stage, report_id), compression="zstd")
            data = data.set_column(at, field, pa.array([False] * len(data), pa.bool_()))
        pq.write_table(data, folder / PART, compression="zstd")


def unstage_tables(stage: Path, report_id: str) -> None:
    """Remove a report's staged tables."""
    for table in TABLES:
        shutil.rmtree(_staged(stage, table, report_id), ignore_errors=True)
    _staged_complete(stage, report_id).unlink(missing_ok=True)


def commit_staged(root: Path, stage: Path, staged: Mapping[str, list[str]]) -> list[str]:
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
                name = partition_name(report_id)
                if (root / "reports" / name / PART).is_file():
                    continue  # a concurrent ingest added the same content first
                # reports first (complete = false), the data, then the row saying complete:
                # a kill anywhere leaves a report no reader that keeps complete rows counts.
                for table in ("reports", *DATA_TABLES):
                    target = root / table / name
                    os.rename(_staged(stage, table, report_id), target)
                    moved.append(target)
                done = _staged_complete(stage, report_id)
                if done.is_file():
                    os.replace(done, root / "reports" / name / PART)
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


def remove_stale_staging(root: Path) -> list[str]:
    """Remove ``.staging/ingest-PID-*`` folders whose ingest process no longer runs.

    An ingest killed (SIGKILL, the OOM killer) cannot clean up after itself; the next one
    does. A folder of a live process (a concurrent ingest) is kept. Returns the names removed.
    """
    removed = []
    for folder in sorted((root / ".staging").glob("ingest-*")):
        pid = folder.name.split("-")[1] if folder.name.count("-") >= 2 else ""
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed


@contextlib.contextmanager
def staging_folder(root: Path) -> Iterator[Path]:
    """A private staging folder inside the store (same file system: renames are atomic).

    Staging folders that a killed ingest left (their process is gone) are removed first.
    """
    (root / ".staging").mkdir(exist_ok=True)
    remove_stale_staging(root)
    stage = Path(tempfile.mkdtemp(prefix=f"ingest-{os.getpid()}-", dir=root / ".staging"))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
