"""Reader for ``.ncu-rep`` files through NVIDIA's ``ncu_report`` module.

The ``ncu-report`` wheel on PyPI reads reports offline (no CUDA, no ncu); where it is missing,
the ``extras/python`` folder of an Nsight Compute install works too (``NCU_REPORT_PATH`` or
the usual install folders are tried). The native reader runs in a child process
(``ncu_rep_child.py``): a damaged report that makes it abort ends the child, and the user gets
one line naming the file. Launches stream back one at a time, with only the metrics asked for,
then their source lines; this process never loads the report itself.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import lzma
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ReportParseError
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report
from . import ncu_rep_child
from .common import BOMB_FLOOR, BOMB_RATIO, path_text, short_name
from .source_page import source_lines_frame

# The ncu_report module's own MsgType enum (OK 1, OPTIMIZATION 2, WARNING 3, ERR 4); it differs
# from the numbering inside the report file. Checked against the CSV export of the same report.
_MSG_TYPE = {0: None, 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPE = {0: None, 1: "local", 2: "global"}
_REP_MAGIC = b"NVR\x00"  # first bytes of every report ncu 2025.3 writes
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame (what a .ncu-repz may hold)
_XZ_MAGIC = b"\xfd7zXZ\x00"
_MIN_SIZE = 64  # a report with one kernel result is tens of KB; less is surely cut short
_CHILD = Path(ncu_rep_child.__file__)


def _check_header(path: Path) -> None:
    """Refuse what is surely not a report before native code sees it."""
    with path.open("rb") as fh:
        head = fh.read(_MIN_SIZE)  # the header only: reports run to tens of MB
    if not head:
        raise ReportParseError(f"{path}: file is empty")
    if not head.startswith(_REP_MAGIC):
        raise ReportParseError(f"{path}: not a readable .ncu-rep (no Nsight Compute report "
                               "header)")
    if len(head) < _MIN_SIZE:
        raise ReportParseError(f"{path}: not a readable .ncu-rep (only {len(head)} bytes; "
                               "truncated?)")


def _valid_text(value):
    """The record with every string made valid Unicode.

    A damaged report can hand back names with undecodable bytes (as lone surrogates), which
    no writer (pyarrow, JSON, the terminal) accepts; they become U+FFFD.
    """
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, tuple | list):
        return type(value)(_valid_text(v) for v in value)
    if isinstance(value, dict):
        return {_valid_text(k): _valid_text(v) for k, v in value.items()}
    return value


def _records(path: Path, request: list[str] | dict | None):
    """Run the child on one report and yield its records; a crash becomes one line.

    ``request``: the metric names to read (None: all), or ``{"lines": [record, ...]}``.
    """
    bound = reader_time_bound(path)
    with tempfile.TemporaryFile() as err:  # the native reader logs here, not on our stderr
        proc = subprocess.Popen([sys.executable, str(_CHILD), str(path)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                preexec_fn=_die_with_parent())
        # A child that hangs (a native reader stuck on a damaged report) is killed: its pipe
        # then ends, and the loop below stops.
        stopped = threading.Event()

        def stop() -> None:
            stopped.set()
            proc.kill()

        watchdog = threading.Timer(bound, stop)
        watchdog.daemon = True
        watchdog.start()
        try:
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
            done = False
            while not done:
                try:
                    record = pickle.load(proc.stdout)
                except (EOFError, pickle.UnpicklingError):
                    break
                record = _valid_text(record)
                if record[0] == "error":
                    raise ReportParseError(f"{path}: {record[1]}")
                done = record[0] == "done"
                if not done:
                    yield record
            code = proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if stopped.is_set() and not done:
            raise ReportParseError(
                f"{path}: the ncu_report reader took longer than {bound:.0f} s and was "
                f"stopped (set {TIMEOUT_ENV} to allow more); analyze its raw export "
                "(ncu --import R --csv --page raw) instead")
        if not done or code != 0:
            if code is not None and -code in _SENT_FROM_OUTSIDE:
                raise ReportParseError(
                    f"{path}: reading stopped: the ncu_report reader {_how_it_ended(code)}, "
                    "from outside (out of memory? the system's OOM killer sends SIGKILL); "
                    "that says nothing about the file: try again with more memory, or "
                    "analyze its raw export (ncu --import R --csv --page raw)")
            raise ReportParseError(f"{path}: not a readable .ncu-rep (the ncu_report reader "
                                   f"{_how_it_ended(code)}; the file is damaged or truncated)")


TIMEOUT_ENV = "NCU_ADVISE_READER_TIMEOUT_S"
# The default bound of one reader child: generous (a 257 MB report's metrics child took
# ~10 s on a 2-core machine), so only a hang reaches it, and scaled by the report's size.
_TIMEOUT_BASE_S = 300.0
_TIMEOUT_S_PER_MIB = 2.0


def reader_time_bound(path: Path) -> float:
    """Seconds one reader child of ``path`` may run: :data:`TIMEOUT_ENV`, or by file size.

    Raises:
        ReportParseError: the variable is set to something other than a positive number.

    """
    given = os.environ.get(TIMEOUT_ENV)
    if given is not None and given.strip():
        try:
            bound = float(given)
        except ValueError:
            bound = float("nan")
        if not bound > 0 or bound == float("inf"):
            raise ReportParseError(f"{TIMEOUT_ENV}={given[:40]!r}: not a positive number of "
                                   "seconds")
        return bound
    try:
        mib = path.stat().st_size / (1 << 20)
    except OSError:
        mib = 0.0
    return _TIMEOUT_BASE_S + _TIMEOUT_S_PER_MIB * mib


# Signals a reader gets from someone else (the OOM killer, a user, a job scheduler), not
# from its own crash on a damaged file (SIGSEGV, SIGABRT, SIGBUS).
_SENT_FROM_OUTSIDE = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _die_with_parent():
    """A ``preexec_fn`` that has Linux kill the child when this process dies (else None).

    A reader child outlives a parent killed by SIGKILL or SIGTERM otherwise, holding
    hundreds of MB: ``PR_SET_PDEATHSIG`` sends it SIGKILL then.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
        if os.getppid() != parent:  # the parent died before the call: go now
            os._exit(1)

    return arm


def _how_it_ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"stopped early (exit status {code})"


def is_report_head(head: bytes) -> bool:
    """Whether a file's first bytes (decompressed) are those of an Nsight Compute report."""
    return head.startswith(_REP_MAGIC)


def _zstd_error() -> type[BaseException]:
    try:
        import zstandard
    except ImportError:
        return OSError
    return zstandard.ZstdError


def _bounded_copy(src, dst, path: Path) -> None:
    """Decompress ``src`` into ``dst``, refusing a bomb (far beyond the file's size)."""
    compressed = max(path.stat().st_size, 1)
    done = 0
    while chunk := src.read(1 << 20):
        done += len(chunk)
        if done > BOMB_FLOOR and done > BOMB_RATIO * compressed:
            raise ReportParseError(f"{path}: decompresses to more than {BOMB_RATIO}x its size "
                                   "(a bomb?); no Nsight Compute report does")
        dst.write(chunk)


@contextlib.contextmanager
def _uncompressed(path: Path):
    """The report as a file the native reader can open: itself, or its decompressed copy.

    Known by content, not by name: a gzipped or xz-compressed report (``.ncu-rep.gz``,
    ``.ncu-rep.xz``) and a zstd-compressed one (where the ``zstandard`` package is installed)
    are written to a temporary file.
    """
    with path.open("rb") as fh:
        magic = fh.read(6)
    if not magic.startswith((_GZIP_MAGIC, _ZSTD_MAGIC, _XZ_MAGIC)):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="ncu-advise-") as tmp:
        target = Path(tmp) / "report.ncu-rep"
        try:
            if magic.startswith((_GZIP_MAGIC, _XZ_MAGIC)):
                opener = gzip.open if magic.startswith(_GZIP_MAGIC) else lzma.open
                with opener(path, "rb") as src, target.open("wb") as dst:
                    _bounded_copy(src, dst, path)
            else:
                try:
                    import zstandard
                except ImportError:
                    raise ReportParseError(
                        f"{path}: a zstd-compressed report; install the zstandard package to "
                        "read it, or open it with ncu and export it (ncu --import FILE --csv "
                        "--page raw)") from None
                with path.open("rb") as raw, target.open("wb") as dst, \
                        zstandard.ZstdDecompressor().stream_reader(raw) as src:
                    _bounded_copy(src, dst, path)
        except (OSError, EOFError, zlib.error, lzma.LZMAError, _zstd_error()) as exc:
            raise ReportParseError(f"{path}: the compressed report does not decompress "
                                   f"({exc})") from None
        yield target


def read_ncu_rep(path: Path, metrics: Iterable[str] | None = None) -> Report:
    """Read every kernel result of a ``.ncu-rep`` file, gzip- or zstd-compressed or not.

    Args:
        path: the report.
        metrics: metric names to keep (None: all). Launch facts (grid, block, duration,
            compute capability) are always read.

    """
    with _uncompressed(path) as native:
        if native == path:
            return _read_native(path, metrics)
        try:
            report = _read_native(native, metrics)
        except ReportParseError as exc:  # name the user's file, not the temporary copy
            raise ReportParseError(str(exc).replace(str(native), str(path))) from None
    report.launches["source"] = path_text(path)
    report.sources = [path_text(path)]
    report.warnings = [w.replace(native.name, path.name) for w in report.warnings]
    return report


def _read_native(path: Path, metrics: Iterable[str] | None) -> Report:
    """Read an uncompressed report through the native reader (in child processes)."""
    _check_header(path)
    launch_rows, rule_rows, empty = [], [], 0
    names_parts, unit_parts, value_parts, launch_parts = [], [], [], []
    texts: dict[int, str] = {}
    position = 0
    launch_of: dict[int, int] = {}  # the child's record number -> launch number
    with_counters: list[int] = []
    for record in _records(path, None if metrics is None else sorted(metrics)):
        if record[0] == "counters":
            with_counters = record[1]
            continue
        _, facts, names, units, values, strings, rules = record
        number = len(launch_of) + empty
        if not facts.get("name") and not names:
            empty += 1  # a cut-short or damaged report holds results without name or metrics
            continue
        idx = len(launch_rows)
        launch_of[number] = idx
        launch_rows.append(_launch_row(idx, path, facts))
        names_parts.append(names)
        unit_parts.append(units)
        value_parts.append(np.asarray(values, dtype=np.float64))
        launch_parts.append(np.full(len(names), idx, dtype=np.int64))
        texts.update({position + i: t for i, t in strings.items()})
        position += len(names)
        for section, rule, mtype, title, message, stype, speedup in rules:
            rule_rows.append({
                "launch": idx, "section": section, "rule": rule,
                "type": _MSG_TYPE.get(_small_int(mtype)), "title": title,
                "description": message, "speedup_type": _SPEEDUP_TYPE.get(_small_int(stype)),
                "speedup": speedup,
            })
    if not launch_rows:
        raise ReportParseError(f"{path}: the report holds no profiled kernels"
                               + (" (truncated or damaged?)" if empty else ""))
    warnings = [f"{path.name}: skipped {empty} kernel result(s) without name or metrics "
                "(truncated or damaged report?)"] if empty else []
    launches = pd.DataFrame(launch_rows, columns=LAUNCH_COLUMNS)
    for col in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "id", "device",
                "context", "stream"):
        launches[col] = _safe_int_column(launches[col])
    flat_names = [n for part in names_parts for n in part]
    text = np.full(len(flat_names), None, dtype=object)
    for i, t in texts.items():
        text[i] = t
    metrics_frame = pd.DataFrame({
        "launch": np.concatenate(launch_parts) if launch_parts else np.empty(0, np.int64),
        "section": None,
        "metric": pd.Categorical(flat_names),
        "label": None,
        "unit": pd.Categorical([u for part in unit_parts for u in part]),
        "value": np.concatenate(value_parts) if value_parts else np.empty(0),
        "text": text,
    })[METRIC_COLUMNS]
    rules_frame = pd.DataFrame(rule_rows, columns=RULE_COLUMNS)
    # ncu's rule text uses @section:Id:Label@ / @url:Text:URL@ markup; show the text.
    rules_frame["description"] = rules_frame["description"].astype(object).str.replace(
        r"@section:[^:@]*:([^@]*)@", r"\1", regex=True).str.replace(
        r"@url:([^:@]*):([^@]*)@", r"\1 (\2)", regex=True)
    return Report(launches=launches, metrics=metrics_frame, ncu_rules=rules_frame,
                  sources=[path_text(path)], warnings=warnings,
                  source_lines=source_lines_frame(_source_rows(path, with_counters, launch_of)))


def _source_rows(path: Path, records: list[int], launch_of: dict[int, int]) -> list[dict]:
    """The source lines of the launches with per-instruction counters, numbered as launches.

    A child per :data:`~.ncu_rep_child.LINES_PER_CHILD` launches: the native reader frees
    none of what it loaded until its process ends.
    """
    rows: list[dict] = []
    records = [r for r in records if r in launch_of]
    step = ncu_rep_child.LINES_PER_CHILD
    try:
        for start in range(0, len(records), step):
            for _, number, found in _records(path, {"lines": records[start:start + step]}):
                rows.extend({**row, "launch": launch_of[number]} for row in found)
    except ReportParseError:  # the metrics were read whole; lines are a bonus
        pass
    return rows


def _small_int(value) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def _safe_int_column(values: pd.Series) -> pd.Series:
    """Floats to nullable integers; NaN and values beyond int64 become missing."""
    numbers = pd.to_numeric(values, errors="coerce").astype("float64")
    numbers = numbers.where(numbers.abs() < 2.0**62).round()
    return numbers.astype("Int64")


def _launch_row(idx: int, path: Path, facts: dict) -> dict:
    def get(metric_name: str) -> float:
        return facts.get(metric_name, np.nan)

    name = facts.get("name") or ""
    major, minor = (get("device__attribute_compute_capability_major"),
                    get("device__attribute_compute_capability_minor"))
    cc = None
    if np.isfinite(major) and abs(major) < 1000:
        cc = f"{int(major)}.{int(minor) if np.isfinite(minor) and abs(minor) < 1000 else 0}"
    return {
        "launch": idx, "source": path_text(path), "form": "ncu-rep", "id": idx,
        "process_id": None, "process": None, "host": None, "name": name,
        "short_name": short_name(name),
        "grid_x": get("launch__grid_dim_x"), "grid_y": get("launch__grid_dim_y"),
        "grid_z": get("launch__grid_dim_z"), "block_x": get("launch__block_dim_x"),
        "block_y": get("launch__block_dim_y"), "block_z": get("launch__block_dim_z"),
        "device": get("launch__device_id"), "cc": cc,
        "context": get("launch__context_id"), "stream": get("launch__stream_id"),
        "nvtx": facts.get("nvtx"), "duration_ns": get("gpu__time_duration.sum"),
        "invocations": 1,
    }
