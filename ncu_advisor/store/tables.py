"""One analysed report as the store's typed tables.

Launches, metrics, ncu_rules, quantities, findings, and its row of the ``reports`` table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from .._version import __version__
from ..analysis.contract import KEY_QUANTITIES
from ..analysis.result import Analysis
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report

if TYPE_CHECKING:
    pass
try:  # POSIX; Windows locks through msvcrt
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None


STORE_SCHEMA_VERSION = 1


STR, INT, _FLOAT = pa.string(), pa.int64(), pa.float64()


_TS = pa.timestamp("us", tz="UTC")


LAUNCH_TYPES = {
    "launch": INT, "id": INT, "process_id": INT, "grid_x": INT, "grid_y": INT,
    "grid_z": INT, "block_x": INT, "block_y": INT, "block_z": INT, "device": INT,
    "context": INT, "stream": INT, "duration_ns": _FLOAT, "invocations": INT,
}


_METRIC_TYPES = {"launch": INT, "value": _FLOAT, "minimum": _FLOAT, "maximum": _FLOAT}


_RULE_TYPES = {"launch": INT, "speedup": _FLOAT}


def _schema(columns: Iterable[str], types: Mapping[str, pa.DataType]) -> pa.Schema:
    """Columns of a Report table, typed; any column without a type is text."""
    return pa.schema([(c, types.get(c, STR)) for c in columns])


# Table schemas as stored in the files (report_id is the partition folder, not a column).
SCHEMAS: dict[str, pa.Schema] = {
    "reports": pa.schema([
        ("schema_version", pa.int32()), ("source", STR), ("content_hash", STR),
        ("file_hashes", pa.list_(STR)), ("gpu", STR), ("cc", STR), ("ncu_version", STR),
        ("captured_at", _TS), ("ingested_at", _TS), ("launch_count", INT),
        ("kernel_count", INT), ("total_duration_ns", _FLOAT), ("finding_count", INT),
        ("labels", pa.map_(STR, STR)), ("session", STR), ("warnings", pa.list_(STR)),
        ("tool_version", STR), ("complete", pa.bool_()),
    ]),
    "launches": _schema(LAUNCH_COLUMNS, LAUNCH_TYPES),
    "metrics": _schema([*METRIC_COLUMNS, "minimum", "maximum"], _METRIC_TYPES),
    "ncu_rules": _schema(RULE_COLUMNS, _RULE_TYPES),
    "quantities": pa.schema([("launch", INT), ("bound", STR), ("time_share_pct", _FLOAT),
                             *[(q, _FLOAT) for q in KEY_QUANTITIES if q != "duration_ns"]]),
    "findings": pa.schema([
        ("launch", INT), ("kernel_id", INT), ("short_name", STR), ("rule", STR),
        ("category", STR), ("severity", STR), ("confidence", STR), ("title", STR),
        ("advice", STR), ("estimated_speedup_pct", _FLOAT), ("estimated_saving_ns", _FLOAT),
        ("demo", STR), ("evidence", STR), ("launch_ids", pa.list_(INT)),
    ]),
}


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
        # Staged as false and renamed into place before the data partitions; the true row
        # replaces it once they are all in place (layout.commit_staged).
        "complete": True,
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
