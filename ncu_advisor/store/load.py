"""Reading one stored report back as a Report and its findings."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import StoreError
from ..report import LAUNCH_COLUMNS, Report

if TYPE_CHECKING:
    pass
try:  # POSIX; Windows locks through msvcrt
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None
from .ingest import parse_labels
from .layout import PART, open_store, partition_name
from .query import query
from .tables import INT, LAUNCH_TYPES


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
    name = partition_name(chosen["report_id"])

    def read(table: str) -> pa.Table:
        return pq.read_table(root / table / name / PART)

    launches = _frame(read("launches"), [c for c, t in LAUNCH_TYPES.items()
                                         if t == INT and c not in ("launch", "invocations")])
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
