"""SQL over the store (DuckDB on the Parquet files in place), named queries and trends."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from ..errors import StoreError

if TYPE_CHECKING:
    import duckdb
try:  # POSIX; Windows locks through msvcrt
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None
from .layout import PART, TABLES, open_store, read_marker
from .tables import SCHEMAS, STR


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def connect(store: str | os.PathLike, tables: Iterable[str] | None = None,
            confined: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per table over the store's Parquet files.

    Views: ``reports``, ``launches``, ``metrics``, ``ncu_rules``, ``quantities``, ``findings``
    (each with ``report_id`` first) and ``report_labels`` (``report_id``, ``key``, ``value``).

    Args:
        store: the store folder.
        tables: make views for these tables only (default: all); each view lists its
            table's files, so a query that names two tables need not list the other four.
        confined: lock the connection to the store's folder (DuckDB's file access outside
            it, extension installs and loads, and configuration changes are refused), so
            that SQL from a user or a script cannot read or write anywhere else.

    """
    import duckdb

    root = open_store(store)
    wanted = set(TABLES if tables is None else tables)
    if "report_labels" in wanted:
        wanted.add("reports")
    marker = read_marker(root) or {}
    mixed = bool(marker.get("mixed_columns"))
    # A report is in the store when its reports row says complete (a store begun before
    # the flag, with one schema, has no such column: its rows were renamed in last).
    flagged = mixed or "complete" in (marker.get("columns") or {}).get("reports", [])
    con = duckdb.connect(":memory:")
    if tables is not None and wanted - {"reports"}:
        wanted.add("reports")  # the data views keep the reports that are complete
    for table in ("reports", *(t for t in TABLES if t != "reports")):
        if table not in wanted:
            continue
        folder = root / table
        if next(folder.glob(f"report_id=*/{PART}"), None) is not None:
            pattern = _sql_text(str(folder / "report_id=*" / "*.parquet"))
            if table == "reports":
                only = " WHERE complete IS NOT FALSE" if flagged else ""
            else:  # partitions of a commit in progress (or a killed one) are not seen
                only = " WHERE report_id IN (SELECT report_id FROM reports)"
            con.execute(
                f"CREATE VIEW {table} AS SELECT report_id, * EXCLUDE (report_id) FROM "
                f"read_parquet({pattern}, hive_partitioning = true, "
                f"hive_types = {{'report_id': VARCHAR}}, union_by_name = {str(mixed).lower()})"
                f"{only}")
        else:
            schema = pa.schema([("report_id", STR), *SCHEMAS[table]])
            con.register(f"_empty_{table}", schema.empty_table())
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM _empty_{table}")
    if "reports" in wanted:
        con.execute("CREATE VIEW report_labels AS SELECT report_id, unnest(map_keys(labels)) "
                    "AS key, unnest(map_values(labels)) AS value FROM reports")
    if confined:
        con.execute(f"SET allowed_directories = [{_sql_text(str(root))}]")
        for setting in ("enable_external_access", "autoinstall_known_extensions",
                        "autoload_known_extensions"):
            con.execute(f"SET {setting} = false")
        con.execute("SET lock_configuration = true")  # the user's SQL cannot undo the above
    return con


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _tables_named(sql: str) -> list[str]:
    """The store tables a query names (a word match: a false hit only costs a listing)."""
    return [t for t in (*TABLES, "report_labels")
            if re.search(rf"\b{t}\b", sql, flags=re.IGNORECASE)]


def query(store: str | os.PathLike, sql: str, params: Mapping[str, object] | None = None,
          allow_write: bool = False) -> pa.Table:
    """Run SQL on a store (DuckDB dialect) and return the result as an Arrow table.

    Read-only by default: only SELECT (and EXPLAIN) statements run, on a connection confined
    to the store (:func:`connect`); ``allow_write`` lifts both (COPY, CREATE, ATTACH, files
    anywhere).

    Raises:
        StoreError: the store is not one, a statement would write, or DuckDB rejected the
            query (its message).

    """
    import duckdb

    try:
        # Views read the files' footers when made: a damaged partition fails here.
        con = connect(store, _tables_named(sql), confined=not allow_write)
    except duckdb.Error as exc:
        raise StoreError(f"{store}: the store cannot be read ({_first_line(exc)}); a "
                         "damaged file? ingest again into a new store") from None
    try:
        if not allow_write:
            reading = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
            kinds = [s.type for s in con.extract_statements(sql)]
            refused = sorted({k.name for k in kinds if k not in reading})
            if refused:
                raise StoreError(f"query is read-only: {', '.join(refused)} refused (only "
                                 "SELECT and EXPLAIN run; --allow-write lifts it)")
        relation = con.sql(sql, params=dict(params) if params else None)
        if relation is None:  # a statement without a result (SET, CREATE VIEW ...)
            return pa.table({})
        # DuckDB 1.4 named it to_arrow_table (before: arrow(), which 2.0 turned into a reader).
        fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
        return fetch()
    except duckdb.Error as exc:
        raise StoreError(f"query failed: {_first_line(exc)}") from None
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
    folder = resources.files("ncu_advisor").joinpath("store/queries")
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
