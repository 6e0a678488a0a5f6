"""Reader for every CSV that ``ncu --csv`` (live) or ``ncu --import ... --csv`` writes.

Three families, told apart by their header line:

* details page (default): one row per (launch, section, metric) plus rule rows;
  ``--print-details all`` adds a ``Body Item Label`` column and interleaves non-CSV lines;
* raw page (``--page raw``): one row per launch, one column per metric, a second row of units;
* per-kernel summary (``--print-summary per-kernel``): one row per (kernel, metric) with
  ``Invocations``, ``Minimum``, ``Maximum``, ``Average``.

Live runs put ``==PROF==`` lines and the program's own output before the header.  Column
positions shift with ``--nvtx``, so every column is located by name.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import ReportParseError
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report
from ..units import normalize_unit
from .common import (
    METRIC_NAME,
    nvtx_ranges,
    parse_numbers,
    parse_triples,
    read_input_bytes,
    short_name,
)
from .labels import resolve_labels

_HEADER = re.compile(r'^"(ID|Process ID)",', re.MULTILINE)
_IDENTITY = {
    "ID": "id", "Process ID": "process_id", "Process Name": "process", "Host Name": "host",
    "Kernel Name": "name", "Context": "context", "Stream": "stream", "Device": "device",
    "CC": "cc",
}
_LABEL_NAME = re.compile(r"^(.*) \(([a-z0-9.]*_[a-z0-9_.]*)\)$")  # "Label (metric_name)"
DURATION = "gpu__time_duration.sum"


def decode(raw: bytes, path: Path) -> str:
    """Decode an export: UTF-8 (with or without BOM) or UTF-16 with a BOM (PowerShell's ``>``)."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ReportParseError(f"{path}: broken UTF-16 text ({exc.reason})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportParseError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "re-export it with ncu --csv"
        ) from None


def read_csv_export(path: Path) -> Report:
    """Read one ncu CSV export of any page or option into a Report."""
    raw = read_input_bytes(path)
    if not raw or raw.isspace():
        raise ReportParseError(f"{path}: file is empty")
    if b"\x00" in raw[:4096] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ReportParseError(f"{path}: binary data, not a CSV export (is it a .ncu-rep?)")
    text = decode(raw, path)
    match = _HEADER.search(text)
    if match is None:
        raise ReportParseError(
            f"{path}: not an Nsight Compute CSV export (no header line starting with "
            '"ID", or "Process ID",)'
        )
    preamble = [ln for ln in text[: match.start()].splitlines() if ln.strip()]
    line_end = text.find("\n", match.start())
    header_line = text[match.start(): line_end if line_end >= 0 else len(text)].rstrip("\r")
    header = next(csv.reader([header_line]))
    warnings: list[str] = []
    # pyarrow parses the body from bytes; a PowerShell UTF-16 file is re-encoded first.
    data = raw if not raw.startswith((b"\xff\xfe", b"\xfe\xff")) else text.encode("utf-8")
    start = data.find(header_line.encode("utf-8")) + len(header_line.encode("utf-8")) + 1
    body = data[start:]
    if not body.endswith(b"\n") and not body.isspace():
        # ncu ends every line with a newline: a missing one means the file was cut short.
        warnings.append(f"{path.name}: the file ends mid-line (truncated?); its last line was "
                        "skipped")
        body = body[: body.rfind(b"\n") + 1]
    if not body or body.isspace():
        raise ReportParseError(f"{path}: the CSV header has no data rows")
    if "Invocations" in header:
        form = "summary"
        frame, _, other = _arrow_rows(body, header, len(header), path, warnings)
        report = _summary(frame, path)
        _warn_skipped(other, path, warnings)
    elif "Metric Name" in header:
        form = "details"
        # Metric rows stop after "Metric Value" plus one empty field; rule rows are complete.
        width = header.index("Metric Value") + 2 if "Rule Name" in header else len(header)
        frame, long_rows, other = _arrow_rows(body, header, width, path, warnings)
        report = _details(frame, long_rows, header, path, warnings,
                          print_details_all="Body Item Label" in header)
        if "Body Item Label" not in header:  # that form interleaves prose and mini-tables
            _warn_skipped(other, path, warnings)
    else:
        form = "raw"
        lines = body.decode("utf-8", errors="replace").split("\n")
        data_lines = [ln for ln in lines if ln.startswith('"')]
        other = sum(1 for ln in lines if ln.strip() and not ln.startswith('"'))
        report = _raw(_parse_rows(data_lines, header, path, warnings), header, path, warnings)
        if other:
            warnings.append(f"{path.name}: skipped {other} non-CSV line(s) after the header")
    report.launches["form"] = form
    report.session.update(_session_from_preamble(preamble))
    report.warnings[:0] = warnings
    return report


def _warn_skipped(lines: list[str], path: Path, warnings: list[str]) -> None:
    """Name what was skipped: how many lines, and the first one."""
    if lines:
        warnings.append(f"{path.name}: skipped {len(lines)} malformed or non-data line(s), "
                        f"first: {lines[0][:70]!r}")


def _arrow_rows(body: bytes, header: list[str], width: int, path: Path,
                warnings: list[str]) -> tuple[pd.DataFrame, list[list[str]], list[str]]:
    """Parse rows ``width`` fields wide with pyarrow's multithreaded CSV reader.

    Repeated columns (names, sections, units) become categoricals. Rows of the full header
    width (rule rows) come back parsed, in file order; other lines (prose and inline tables
    of ``--print-details all``, malformed rows) are returned as text and skipped.
    """
    names = _unique(header)[:width]
    if width < len(header):
        names[-1] = "_trail"  # metric rows end with one empty field after "Metric Value"
    long_rows: list[str] = []
    other: list[str] = []

    def keep_long(row) -> str:
        if row.actual_columns == len(header) and width != len(header):
            long_rows.append(row.text)
        else:
            other.append(row.text)
        return "skip"

    value_cols = {"Metric Value", "Minimum", "Maximum", "Average", "_trail"}
    types = {c: (pa.string() if c in value_cols else pa.dictionary(pa.int32(), pa.string()))
             for c in names}
    try:
        table = pacsv.read_csv(
            pa.py_buffer(body),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=True),
            parse_options=pacsv.ParseOptions(invalid_row_handler=keep_long),
            convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ReportParseError(f"{path}: malformed CSV ({str(exc).splitlines()[0]})") from None
    frame = table.to_pandas()
    rules = list(csv.reader(long_rows))
    return frame, rules, other


def _parse_rows(lines: list[str], header: list[str], path: Path,
                warnings: list[str]) -> pd.DataFrame:
    """Parse the CSV body with pandas' C parser, every field as text (raw page)."""
    names = _unique(header)
    if not lines:
        raise ReportParseError(f"{path}: the CSV header has no data rows")
    try:
        frame = pd.read_csv(
            io.StringIO("\n".join(lines)), header=None, names=names, dtype=str,
            keep_default_na=False, na_filter=False, engine="c", on_bad_lines="skip",
            index_col=False,
        )
    except (pd.errors.ParserError, ValueError) as exc:
        raise ReportParseError(f"{path}: malformed CSV ({str(exc).splitlines()[0]})") from None
    if len(frame) < len(lines):
        warnings.append(f"{path.name}: skipped {len(lines) - len(frame)} malformed CSV row(s)")
    return frame


def _unique(header: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for h in header:
        n = seen.get(h, 0)
        seen[h] = n + 1
        out.append(h if n == 0 else f"{h}.{n}")
    return out


def _per_category(series: pd.Series, fn) -> np.ndarray:
    """Apply ``fn`` to the distinct values of a (categorical) column, then spread by code.

    Identity and name columns repeat on every row; working on the distinct values keeps the
    reader vectorized and fast on exports of hundreds of thousands of rows.
    """
    if not isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype("category")
    mapped = np.asarray(fn(pd.Series(series.cat.categories.astype(str))))
    codes = series.cat.codes.to_numpy()
    out = mapped[codes] if len(mapped) else np.empty(len(codes), dtype=mapped.dtype)
    if (codes < 0).any():
        out = out.astype(object)
        out[codes < 0] = None
    return out


def _digits(values: pd.Series) -> np.ndarray:
    return values.str.fullmatch(r"\d+").to_numpy(dtype=bool)


def _valid_rows(frame: pd.DataFrame, key: str) -> np.ndarray:
    """Rows that belong to the table (drops inline mini-tables of ``--print-details all``)."""
    ok = _per_category(frame[key], _digits).astype(bool)
    if "Process ID" in frame and key != "Process ID":
        ok &= _per_category(frame["Process ID"], _digits).astype(bool)
    return ok


def _row_keys(frame: pd.DataFrame, key_cols: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Number the launches in order of appearance; return (launch of each row, first rows)."""
    key = np.zeros(len(frame), dtype=np.int64)
    for col in key_cols:
        cat = frame[col].astype("category") if not isinstance(
            frame[col].dtype, pd.CategoricalDtype) else frame[col]
        key = key * (len(cat.cat.categories) + 1) + cat.cat.codes.to_numpy().astype(np.int64)
    launch_of, uniques = pd.factorize(key, sort=False)
    first = np.full(len(uniques), -1, dtype=np.int64)
    first_rev = np.arange(len(key))[::-1]
    first[launch_of[::-1]] = first_rev  # the last write wins: the first occurrence
    return launch_of, first


def _launch_table(first: pd.DataFrame, frame_columns, path: Path) -> pd.DataFrame:
    """Build LAUNCH_COLUMNS from the first row of each launch."""
    first = first.astype(object).where(first.notna(), None)
    out = pd.DataFrame({"launch": np.arange(len(first))})
    out["source"] = str(path)
    out["form"] = None
    for col, name in _IDENTITY.items():
        out[name] = first[col].astype(str).to_numpy() if col in first else None
    for col in ("id", "process_id", "device", "context", "stream"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("Int64")
    out["name"] = out["name"].astype(str)
    out["short_name"] = out["name"].map(short_name)
    for prefix, col in (("grid", "Grid Size"), ("block", "Block Size")):
        triples = parse_triples(first[col] if col in first else pd.Series([""] * len(first)))
        for i, axis in enumerate("xyz"):
            out[f"{prefix}_{axis}"] = triples[i].to_numpy()
    nvtx_col = next((c for c in frame_columns if c.startswith("thread Domain")), None)
    out["nvtx"] = first[nvtx_col].astype(str).map(nvtx_ranges).to_numpy() if nvtx_col else None
    if nvtx_col:
        # --print-nvtx-rename kernel prefixes the range: "copies/copy_coalesced(...)".
        out["short_name"] = [
            short_name(n[len(r) + 1:]) if isinstance(r, str) and n.startswith(r + "/") else s
            for n, r, s in zip(out["name"], out["nvtx"], out["short_name"], strict=True)]
    out["duration_ns"] = np.nan
    out["invocations"] = 1
    return out


def _finish(launches: pd.DataFrame, metrics: pd.DataFrame, rules: pd.DataFrame,
            path: Path) -> Report:
    if launches.empty:
        raise ReportParseError(f"{path}: no profiled launches in this export")
    duration = metrics[metrics["metric"] == DURATION].drop_duplicates("launch")
    launches["duration_ns"] = launches["launch"].map(
        duration.set_index("launch")["value"]).astype("float64")
    launches = launches[LAUNCH_COLUMNS + [c for c in launches.columns if c not in LAUNCH_COLUMNS]]
    return Report(launches=launches.reset_index(drop=True), metrics=metrics.reset_index(drop=True),
                  ncu_rules=rules.reset_index(drop=True), sources=[str(path)])


def _split_metric_names(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Split "Label (metric_name)" / "metric_name" / "Label" per distinct value."""
    def label_of(v: pd.Series) -> np.ndarray:
        split = v.str.extract(_LABEL_NAME)
        is_name = v.str.fullmatch(METRIC_NAME)
        return split[0].where(split[0].notna(), v.where(~is_name)).to_numpy(dtype=object)

    def metric_of(v: pd.Series) -> np.ndarray:
        split = v.str.extract(_LABEL_NAME)
        is_name = v.str.fullmatch(METRIC_NAME)
        return split[1].where(split[1].notna(), v.where(is_name)).to_numpy(dtype=object)

    return _per_category(names, label_of), _per_category(names, metric_of)


def _units(values: pd.Series, units: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Numbers in base units: one unit conversion per distinct unit string."""
    base = _per_category(units, lambda u: u.map(lambda x: normalize_unit(x)[0]))
    factor = _per_category(units, lambda u: u.map(lambda x: normalize_unit(x)[1])).astype(float)
    return parse_numbers(values) * factor, base


def _details(frame: pd.DataFrame, rule_rows: list[list[str]], header: list[str], path: Path,
             warnings: list[str], print_details_all: bool) -> Report:
    """Details page (any --print-metric-name / --print-units / --print-details variant)."""
    valid = _valid_rows(frame, "ID")
    names = frame["Metric Name"]
    valid &= _per_category(names, lambda v: v.ne("").to_numpy()).astype(bool)
    dropped = int((~valid).sum())
    if dropped and not print_details_all:
        warnings.append(f"{path.name}: skipped {dropped} row(s) that are not launch rows")
    frame = frame[valid]
    key_cols = [c for c in ("ID", "Process ID", "Kernel Name") if c in frame]
    launch_of, first = _row_keys(frame, key_cols)
    launches = _launch_table(frame.iloc[first], frame.columns, path)
    label, metric = _split_metric_names(frame["Metric Name"])
    values, units = _units(frame["Metric Value"], frame["Metric Unit"])
    metrics = pd.DataFrame({
        "launch": launch_of,
        "section": frame["Section Name"].array,
        "body_item": frame["Body Item Label"].array if print_details_all else "",
        "metric": metric, "label": label, "unit": units, "value": values,
        "text": frame["Metric Value"].array,
    })
    metrics = resolve_labels(metrics)[METRIC_COLUMNS]
    rules = _rule_table(rule_rows, header, launches)
    return _finish(launches, metrics, rules, path)


def _rule_table(rule_rows: list[list[str]], header: list[str],
                launches: pd.DataFrame) -> pd.DataFrame:
    """Ncu's rule rows (the few complete rows of a details export)."""
    if not rule_rows or "Rule Name" not in header:
        return pd.DataFrame(columns=RULE_COLUMNS)
    rows = pd.DataFrame([r for r in rule_rows if len(r) == len(header)], columns=_unique(header))
    rows = rows[rows["Rule Name"].ne("")]
    ident = {(str(i), str(p), n): launch for i, p, n, launch in zip(
        launches["id"], launches["process_id"], launches["name"], launches["launch"],
        strict=True)}
    launch = [ident.get((i, p, n)) for i, p, n in zip(
        rows["ID"], rows["Process ID"], rows["Kernel Name"], strict=True)]
    rows = rows.assign(_launch=launch).dropna(subset=["_launch"])
    return pd.DataFrame({
        "launch": rows["_launch"].astype(int).to_numpy(),
        "section": rows["Section Name"].to_numpy(),
        "rule": rows["Rule Name"].to_numpy(),
        "type": rows["Rule Type"].to_numpy(),
        "title": None,  # the CSV keeps only the rule id, not the message title
        "description": rows["Rule Description"].to_numpy(),
        "speedup_type": rows["Estimated Speedup Type"].replace("", None).to_numpy(),
        "speedup": parse_numbers(rows["Estimated Speedup"]),
    })


def _raw(frame: pd.DataFrame, header: list[str], path: Path, warnings: list[str]) -> Report:
    """Raw page: wide, with a units row under the header."""
    units_row = frame.iloc[0]
    if units_row.get("ID", "x") != "":
        warnings.append(f"{path.name}: raw page without a units row; values taken as exported")
        units_row = pd.Series("", index=frame.columns)
    else:
        frame = frame.iloc[1:]
    frame = frame[_valid_rows(frame, "ID")]
    key_cols = [c for c in ("ID", "Process ID", "Kernel Name") if c in frame]
    _, first = _row_keys(frame, key_cols)
    frame = frame.iloc[first]  # one row per launch already; drops accidental duplicates
    launches = _launch_table(frame, frame.columns, path)
    ident = set(_IDENTITY) | {"Block Size", "Grid Size"}
    metric_cols = [c for c in frame.columns if c not in ident and not c.startswith(
        ("thread Domain", "Id:Domain"))]
    long = frame[metric_cols].set_axis(np.arange(len(frame))).melt(
        ignore_index=False, var_name="metric", value_name="text")
    launch = long.index.to_numpy()
    unit_text = long["metric"].map(units_row[metric_cols].to_dict()).astype("category")
    values, units = _units(long["text"], unit_text)
    # PM-sampling columns keep their unit-group prefix ("TPC.TriageCompute.sm__..."): they
    # are sampled time series, not the same measurement as the plain metric.
    metric = long["metric"]
    metrics = pd.DataFrame({
        "launch": launch, "section": None, "metric": metric.to_numpy(), "label": None,
        "unit": units, "value": values, "text": long["text"].to_numpy(),
    })
    metrics = metrics.sort_values("launch", kind="stable")
    return _finish(launches, metrics, pd.DataFrame(columns=RULE_COLUMNS), path)


def _summary(frame: pd.DataFrame, path: Path) -> Report:
    """Per-kernel summary: one launch row per kernel name and shape, with invocations."""
    frame = frame[_valid_rows(frame, "Process ID")]
    key_cols = ["Process ID", "Kernel Name", "Block Size", "Grid Size", "Device", "CC"]
    launch_of, first = _row_keys(frame, key_cols)
    launches = _launch_table(frame.iloc[first], frame.columns, path)
    launches["id"] = pd.array([pd.NA] * len(launches), dtype="Int64")  # summaries have no IDs
    launches["invocations"] = pd.to_numeric(
        frame["Invocations"].iloc[first].astype(str), errors="coerce").to_numpy()
    avg, units = _units(frame["Average"], frame["Metric Unit"])
    lo, _ = _units(frame["Minimum"], frame["Metric Unit"])
    hi, _ = _units(frame["Maximum"], frame["Metric Unit"])
    label, metric = _split_metric_names(frame["Metric Name"])
    metrics = pd.DataFrame({
        "launch": launch_of, "section": frame["Section Name"].astype(str).to_numpy(dtype=object),
        "body_item": "", "metric": metric, "label": label, "unit": units, "value": avg,
        "text": frame["Average"].to_numpy(dtype=object), "minimum": lo, "maximum": hi,
    })
    metrics = resolve_labels(metrics)
    metrics = metrics[METRIC_COLUMNS + ["minimum", "maximum"]]
    return _finish(launches, metrics, pd.DataFrame(columns=RULE_COLUMNS), path)


def _session_from_preamble(preamble: list[str]) -> dict:
    """Facts a live run prints before the CSV (clock control, metrics it could not collect)."""
    facts: dict = {}
    prof = [ln for ln in preamble if ln.startswith("==")]
    if prof:
        facts["ncu_messages"] = prof
    if any("unmodified GPU clocks" in ln for ln in prof):
        facts["clock_control"] = "none"
    return facts
