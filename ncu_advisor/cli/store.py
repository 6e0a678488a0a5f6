"""``ncu-advise ingest``, ``query`` and ``trend``: the report store on the command line.

Registered by the main CLI (``app.command("ingest")(ingest_command)``, ...); the library is
:mod:`ncu_advisor.store`. Input errors are :class:`~ncu_advisor.errors.NcuAdviseError`
(one line, exit code 2 there).
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    import pyarrow as pa

from ..errors import NcuAdviseError
from ..render.formats import safe_text
from .output import check_output_file, check_store_folder, write_text

STORE_HELP = "The store folder (a hive-partitioned Parquet dataset; created by ingest)."


class TableFormat(StrEnum):
    """Output formats of ``query``."""

    text = "text"
    csv = "csv"
    json = "json"


class TrendFormat(StrEnum):
    """Output formats of ``trend``."""

    text = "text"
    csv = "csv"
    json = "json"
    html = "html"


def _emit(text: str, output: Path | None) -> None:
    """Print (also for ``-o -``), or write a file all at once through the one safe writer."""
    if output is None or str(output) == "-":
        typer.echo(text, nl=False)
        return
    write_text(output, text)
    typer.echo(f"wrote {output}", err=True)


def _jsonable(value: Any) -> Any:
    """A query value as JSON: NaN/inf as null, times as ISO text, maps as objects."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # Arrow maps arrive as lists of (key, value) pairs.
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {str(k): _jsonable(v) for k, v in value}
        return [_jsonable(v) for v in value]
    return value


def format_table(table: pa.Table, fmt: TableFormat) -> str:
    """Format a query result: an aligned table, CSV, or a JSON list of row objects."""
    if fmt is TableFormat.json:
        return json.dumps([_jsonable(r) for r in table.to_pylist()], indent=2,
                          allow_nan=False) + "\n"
    frame = table.to_pandas()
    if fmt is TableFormat.csv:
        buf = io.StringIO()
        frame.to_csv(buf, index=False)
        return buf.getvalue()
    if frame.empty:
        return "(no rows)\n" if len(frame.columns) else ""
    return text_table(table)


CELL_WIDTH = 40  # the widest cell of a text table; csv and json give values whole


def _cell(value: Any) -> str:
    """A query value for a terminal table: empty when missing, numbers short, times in ISO."""
    value = _jsonable(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str) and "T" in value[:11] and value[:4].isdigit():
        value = value.replace("T", " ").split(".")[0].split("+")[0]  # an ISO time, seconds
    if isinstance(value, dict | list):
        value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    text = " ".join(safe_text(str(value), newlines=False).split())
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def text_table(table: pa.Table) -> str:
    """An aligned table (numbers right-aligned), not pandas' repr.

    No NaN or NaT, no cell wider than :data:`CELL_WIDTH`; ``-f csv`` or ``-f json`` has every
    value whole.
    """
    rows = table.to_pylist()
    names = table.column_names
    cells = [[_cell(r[n]) for n in names] for r in rows]
    numeric = [all(isinstance(_jsonable(r[n]), int | float) or r[n] is None for r in rows)
               for n in names]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    out = [line([safe_text(n) for n in names]), *(line(c) for c in cells)]
    return "\n".join(out) + f"\n({len(rows)} rows)\n"


def _order_by(order_by: str | None, label: str | None) -> str | None:
    """The label key of ``--order-by``.

    ``--label`` means KEY=VALUE everywhere (ingest, diff): a key given to it here is refused
    with the new spelling.
    """
    if label is None:
        return order_by
    raise NcuAdviseError(f"--label takes KEY=VALUE (ingest, diff --baseline-label); to order "
                         f"by a label use --order-by {label.partition('=')[0]}")


def _params(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise NcuAdviseError(f"--param {item!r} is not NAME=VALUE")
        out[key.strip()] = value
    return out


def ingest_command(
    paths: Annotated[list[Path], typer.Argument(
        help="Report files (.ncu-rep, ncu CSV exports) or folders of them.",
        show_default=False)],
    store: Annotated[Path, typer.Option("--store", help=STORE_HELP, show_default=False)],
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="KEY=VALUE label for every report added (repeatable): "
        "--label commit=abc123 --label branch=main.")] = None,
    group: Annotated[str, typer.Option(
        "--group", help="capture: CSV exports of one capture given together (its raw and "
        "details page) become one report; file: every file is a report. A .ncu-rep is always "
        "a report of its own.")] = "capture",
) -> None:
    """Add reports to a store; files already in it (same content) are skipped."""
    from ..store import ingest, parse_labels

    check_store_folder(store, paths)  # before any work: a store never lands on an input
    labels = parse_labels(label)
    progress = None
    if sys.stderr.isatty():
        def progress(done: int, total: int, path: Path) -> None:
            typer.echo(f"\ringest: {done + 1}/{total} {path.name[-50:]:<50}", err=True, nl=False)

    result = ingest(store, paths, labels=labels, group=group, progress=progress)
    if progress is not None:
        typer.echo("\r" + " " * 70 + "\r", err=True, nl=False)
    for w in result.warnings:
        typer.echo(f"ncu-advise: warning: {w}", err=True)
    for r in result.added:
        typer.echo(f"added {r.report_id}  {r.launches} launch(es), {r.findings} finding(s)  "
                   f"{r.source}")
    for source, report_id in result.already:
        typer.echo(f"already in store as {report_id}  {source}")
    typer.echo(f"{store}: {len(result.added)} report(s) added, {len(result.already)} already "
               "there", err=True)


def query_command(
    store: Annotated[Path, typer.Option("--store", help=STORE_HELP, show_default=False)],
    sql: Annotated[str | None, typer.Argument(
        help="SQL (DuckDB) over the views reports, launches, metrics, ncu_rules, quantities, "
        "findings and report_labels.", show_default=False)] = None,
    format: Annotated[TableFormat, typer.Option(
        "--format", "-f", help="text (aligned table), csv, or json (a list of row objects).",
        case_sensitive=False)] = TableFormat.text,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead of stdout (- is stdout).")] = None,
    named: Annotated[str | None, typer.Option(
        "--named", help="Run a shipped query by name (--list-queries shows them).")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="NAME=VALUE parameter of a named query (repeatable).")] = None,
    top_kernels: Annotated[bool, typer.Option(
        "--top-kernels", help="Kernels ranked by GPU time over all reports "
        "(--named top-kernels).")] = False,
    kernel_time: Annotated[str | None, typer.Option(
        "--kernel-time", metavar="REGEX", help="A kernel's time in each report, ordered by "
        "--label (--named kernel-time).")] = None,
    new_findings_since: Annotated[str | None, typer.Option(
        "--new-findings-since", metavar="REPORT_ID", help="Findings that appeared in reports "
        "after this one (--named new-findings).")] = None,
    order_by: Annotated[str | None, typer.Option(
        "--order-by", metavar="LABEL", help="Label key to order --kernel-time by.")] = None,
    label: Annotated[str | None, typer.Option("--label", hidden=True)] = None,
    list_queries: Annotated[bool, typer.Option(
        "--list-queries", help="List the named queries and their parameters.")] = False,
    allow_write: Annotated[bool, typer.Option(
        "--allow-write", help="Let the SQL write (COPY, CREATE, ATTACH) and reach files "
        "outside the store; by default a query only reads the store.")] = False,
) -> None:
    """Run SQL on a store, or one of the named queries (read-only, confined to the store)."""
    if output is not None and str(output) != "-":  # before any work: never into the store
        check_output_file(output, [], kept=[store])
    order_by = _order_by(order_by, label)
    from ..store import named_queries, query, run_named

    if list_queries:
        for q in named_queries().values():
            typer.echo(f"{q.name}: {q.description}")
            for key, default in q.params.items():
                shown = "required" if default is None else f"default {default!r}"
                typer.echo(f"    --param {key}=...  {q.param_docs[key]} ({shown})")
        return
    params = _params(param)
    chosen = [n for n, on in (("top-kernels", top_kernels), ("kernel-time", kernel_time),
                              ("new-findings", new_findings_since), ("named", named),
                              ("sql", sql)) if on]
    if len(chosen) != 1:
        raise NcuAdviseError("give one of: SQL, --named NAME, --top-kernels, --kernel-time "
                             "REGEX, --new-findings-since REPORT_ID (or --list-queries)")
    if order_by is not None and kernel_time is None:
        raise NcuAdviseError("--order-by goes with --kernel-time")
    if top_kernels:
        named = "top-kernels"
    elif kernel_time is not None:
        named = "kernel-time"
        params = {"kernel": kernel_time, **({"label": order_by} if order_by else {}),
                  **params}
    elif new_findings_since is not None:
        from ..store import report_ids

        if new_findings_since not in report_ids(store):
            raise NcuAdviseError(f"{store}: no report {new_findings_since!r} (the reports "
                                 "query lists them)")
        named = "new-findings"
        params = {"since": new_findings_since, **params}
    if named is not None:
        table = run_named(store, named, params)
    else:
        if params:
            raise NcuAdviseError("--param goes with a named query")
        table = query(store, sql, allow_write=allow_write)
    _emit(format_table(table, format), output)


def trend_command(
    store: Annotated[Path, typer.Option("--store", help=STORE_HELP, show_default=False)],
    kernel: Annotated[str | None, typer.Option(
        "--kernel", "-k", metavar="REGEX", help="Kernels whose full name matches (default: "
        "the whole run).")] = None,
    order_by: Annotated[str | None, typer.Option(
        "--order-by", metavar="LABEL", help="Order reports by this label's value "
        "(numerically when numbers); reports without it are left out. Default: by capture, "
        "else ingest, time.")] = None,
    label: Annotated[str | None, typer.Option("--label", hidden=True)] = None,
    format: Annotated[TrendFormat, typer.Option(
        "--format", "-f", help="text, csv, json, or html (a self-contained chart and table).",
        case_sensitive=False)] = TrendFormat.text,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead of stdout (- is stdout).")] = None,
) -> None:
    """A kernel's (or the run's) GPU time and key quantities across the stored reports."""
    if output is not None and str(output) != "-":  # before any work: never into the store
        check_output_file(output, [], kept=[store])
    label = _order_by(order_by, label)
    from ..render.trend import render_trend_html, render_trend_text
    from ..store import trend

    frame = trend(store, kernel=kernel, label=label)
    if format is TrendFormat.html:
        text = render_trend_html(frame, kernel, label, store=str(store))
    elif format is TrendFormat.text:
        text = render_trend_text(frame, kernel, label)
    else:
        import pyarrow as pa

        text = format_table(pa.Table.from_pandas(frame, preserve_index=False),
                            TableFormat(format.value))
    _emit(text, output)
