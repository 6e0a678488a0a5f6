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
import gzip
import io
import re
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..errors import ReportParseError
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report
from ..units import EXPECTED_BASE, normalize_unit
from .common import (
    MAX_WHOLE,
    METRIC_NAME,
    InputStream,
    NumberFormat,
    finite_or_nan,
    number_format,
    nvtx_ranges,
    parse_numbers,
    parse_triples,
    path_text,
    repeated_texts,
    safe_ints,
    short_name,
)
from .labels import resolve_labels

# The header: the first line of quoted fields that names a "Kernel Name" column. Its first
# field is "ID" (details, raw), "Process ID" (summary) or an NVTX column ("Domain", --nvtx).
_HEADER = re.compile(rb'(?:\A|[\r\n])("[^\r\n]*?"Kernel Name"[^\r\n]*)')
_IDENTITY = {
    "ID": "id", "Process ID": "process_id", "Process Name": "process", "Host Name": "host",
    "Kernel Name": "name", "Context": "context", "Stream": "stream", "Device": "device",
    "CC": "cc",
}
_SHAPE = ("Block Size", "Grid Size")
_LABEL_NAME = re.compile(r"^(.*) \(([a-z0-9.]*_[a-z0-9_.]*)\)$")  # "Label (metric_name)"
DURATION = "gpu__time_duration.sum"
_DETAILS_COLUMNS = {
    "Section Name", "Body Item Label", "Metric Name", "Metric Unit", "Metric Value",
    "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup",
}
_SUMMARY_COLUMNS = {"Invocations", "Section Name", "Metric Name", "Metric Unit", "Minimum",
                    "Maximum", "Average"}
_REQUIRED = {
    "details": ("ID", "Kernel Name", "Metric Name", "Metric Value"),
    "summary": ("Kernel Name", "Metric Name", "Average"),
    "raw": ("ID", "Kernel Name"),
}
_PEEK = 1 << 20  # bytes read to find the header; grown while the header line is incomplete
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode(raw: bytes, path: Path) -> str:
    """Decode an export: UTF-8 (with or without BOM) or UTF-16 with a BOM (PowerShell's ``>``)."""
    if raw.startswith(_UTF16_BOMS):
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


def _open(path: Path) -> InputStream:
    """Open an export for binary reading, decompressing ``.gz`` on the fly, within bounds."""
    return InputStream(path, None)


class _Chain(io.RawIOBase):
    """A read-only stream: some bytes already read, then the rest of a file."""

    def __init__(self, first: bytes, rest) -> None:
        self._first, self._rest = memoryview(first), rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if len(self._first):
            n = min(len(buffer), len(self._first))
            buffer[:n] = self._first[:n]
            self._first = self._first[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def read_csv_export(path: Path, metrics: Iterable[str] | None = None,
                    texts: Iterable[str] | None = None) -> Report:
    """Read one ncu CSV export of any page or option into a Report.

    Args:
        path: the export (``.csv`` or ``.csv.gz``).
        metrics: the metrics to keep (None: all): for raw pages the metric columns (identity
            columns are always read), for details pages the rows (and those of labels that
            name no known metric). Pages are streamed in blocks, so memory follows what is
            kept, not the file's size.
        texts: for raw pages, with ``metrics``: the metrics whose exported text is kept
            where it is a number; other cells keep their text only where it is not one
            (None: every text). A raw page's texts were ~40% of its long table.

    """
    with _open(path) as fh:
        try:
            head = fh.read(_PEEK)
            while True:
                match = _find_header(head)
                complete = match is not None and match.end(1) < len(head)
                if complete or len(head) % _PEEK or len(head) >= 64 * _PEEK:
                    break  # header line complete, file exhausted, or no header near the top
                more = fh.read(_PEEK)
                if not more:
                    break
                head += more
        except (OSError, EOFError, zlib.error) as exc:
            if isinstance(exc, OSError) and not isinstance(exc, gzip.BadGzipFile) \
                    and exc.errno is not None:
                raise
            raise ReportParseError(f"{path}: broken gzip file ({exc})") from None
        if not head or head.isspace():
            raise ReportParseError(f"{path}: file is empty")
        if head.startswith(_UTF16_BOMS):
            # PowerShell's UTF-16: small files in practice; decode whole, parse as UTF-8.
            head = decode(head + _read_rest(fh, path), path).encode("utf-8")
            match = _find_header(head)
        if b"\x00" in head[:4096]:
            raise ReportParseError(f"{path}: binary data, not a CSV export (is it a .ncu-rep?)")
        if head.startswith(b"\xef\xbb\xbf"):
            head = head[3:]
            match = _find_header(head)
        # From the header on (a live run's program may print Latin-1 before it).
        start = match.start(1) if match is not None else 0
        try:
            head[start:].decode("utf-8")
        except UnicodeDecodeError as exc:
            at = start + exc.start
            if at < len(head) - 4 or len(head) % _PEEK:  # not a character cut short
                raise ReportParseError(
                    f"{path}: not UTF-8 text (byte 0x{head[at]:02x} at offset "
                    f"{at}); re-export it with ncu --csv") from None
        if match is None:
            raise ReportParseError(
                f"{path}: not an Nsight Compute CSV export (no header line naming the "
                '"Kernel Name" column, as ncu --csv writes)')
        header_line = match.group(1)
        try:
            header = next(csv.reader([header_line.decode("utf-8")]))
        except (UnicodeDecodeError, csv.Error, StopIteration) as exc:
            raise ReportParseError(f"{path}: unreadable CSV header ({exc})") from None
        preamble_text = head[: match.start(1)].decode("utf-8", errors="replace")
        preamble = [ln for ln in preamble_text.splitlines() if ln.strip()]
        after = match.end(1)
        # Skip the header's own line ending (\n, \r\n or an old Mac's \r).
        if head[after: after + 2] == b"\r\n":
            after += 2
        elif head[after: after + 1] in (b"\r", b"\n"):
            after += 1
        form = _form(header)
        missing = [c for c in _REQUIRED[form] if c not in header]
        if missing:
            raise ReportParseError(f"{path}: the {form}-page CSV header lacks the column(s) "
                                   + ", ".join(repr(c) for c in missing))
        warnings: list[str] = []
        if form == "raw":
            report = _raw_stream(_Chain(head[after:], fh), header, path, warnings, metrics,
                                 texts)
        else:
            report = _paged(_line_chunks(_Chain(head[after:], fh), path, warnings), header,
                            form, path, warnings, metrics)
        if fh.truncated:
            warnings.insert(0, f"{path.name}: the gzip stream ends early (a copy cut short?); "
                            "read what it holds")
    report.launches["form"] = form
    report.session.update(_session_from_preamble(preamble))
    report.warnings[:0] = warnings
    return report


def _find_header(head: bytes) -> re.Match | None:
    """The header line: the first naming "Kernel Name" beside "ID" or "Process ID".

    A live run's program may print a line naming "Kernel Name" itself before ncu's header.
    """
    first = None
    for match in _HEADER.finditer(head):
        first = first or match
        try:
            fields = set(next(csv.reader([match.group(1).decode("utf-8", "replace")])))
        except (csv.Error, StopIteration):
            continue
        if "Kernel Name" in fields and fields & {"ID", "Process ID"}:
            return match
    return first


def _read_rest(fh: InputStream, path: Path) -> bytes:
    """The rest of a UTF-16 page read whole (to re-encode it), within :data:`MAX_WHOLE`."""
    fh.limit, fh.what = MAX_WHOLE, "the UTF-16 reader"
    return fh.read()


# Body bytes parsed at a time (details and summary pages): the page is never held whole,
# so memory follows the tables built, not the file (a 1 GB details page held 4 GB).
CHUNK_BYTES = 32 << 20


def _line_chunks(stream, path: Path, warnings: list[str]):
    r"""Yield a page's body in pieces of whole lines, about :data:`CHUNK_BYTES` each.

    Old Mac line endings (``\r`` only, told from the first piece) become ``\n``, which
    Arrow reads. ncu ends every line with a newline: a last line without one (a file cut
    short) is skipped with a warning. Raises when the body holds no text at all.
    """
    rest, mac, seen_text, eof = b"", None, False, False
    while not eof:
        parts, size = [rest], len(rest)
        # At least one read: a line longer than a piece is carried over until it ends.
        while size < CHUNK_BYTES or len(parts) == 1:
            data = stream.read(max(CHUNK_BYTES - size, 1 << 20))
            if not data:
                eof = True
                break
            parts.append(data)
            size += len(data)
        buf = b"".join(parts)
        del parts
        if mac is None and buf:
            mac = b"\r" in buf and b"\n" not in buf
        if mac:
            buf = buf.replace(b"\r", b"\n")
        cut = buf.rfind(b"\n") + 1
        if not eof and cut == 0:
            rest = buf  # a line longer than a piece (InputStream bounds its length)
            continue
        if eof and cut < len(buf) and (seen_text or not buf.isspace()):
            warnings.append(f"{path.name}: the file ends mid-line (truncated?); its last line "
                            "was skipped")
            buf = buf[:cut]
        piece, rest = (buf, b"") if eof else (buf[:cut], buf[cut:])
        del buf
        if piece and not piece.isspace():
            seen_text = True
        if piece.strip(b"\r\n"):
            yield piece
        del piece
    if not seen_text:
        raise ReportParseError(f"{path}: the CSV header has no data rows")


def _form(header: list[str]) -> str:
    if "Invocations" in header:
        return "summary"
    if {"Metric Name", "Metric Value", "Metric Unit"} & set(header):
        return "details"
    return "raw"


def _unknown_columns(header: list[str], known: set[str]) -> list[str]:
    return [h for h in header if h not in known and h not in _IDENTITY and h not in _SHAPE
            and not _is_nvtx_column(h)]


def _is_nvtx_column(name: str) -> bool:
    return "Domain" in name


def _paged(chunks, header: list[str], form: str, path: Path,
           warnings: list[str], wanted: Iterable[str] | None = None) -> Report:
    """Details and summary pages: one row per (launch, metric), parsed chunk by chunk."""
    if form == "summary":
        frame, _, other = _arrow_rows(chunks, header, len(header), path)
        _warn_unknown(header, _SUMMARY_COLUMNS, path, warnings)
        report = _summary(_with_columns(frame, _SUMMARY_COLUMNS), path, warnings)
        _warn_skipped(other, path, warnings)
        return report
    # Metric rows stop after "Metric Value" plus one empty field; rule rows are complete.
    width = (header.index("Metric Value") + 2
             if "Rule Name" in header and header.index("Metric Value") + 2 < len(header)
             else len(header))
    frame, rule_rows, other = _arrow_rows(chunks, header, width, path)
    _warn_unknown(header, _DETAILS_COLUMNS, path, warnings)
    report = _details(_with_columns(frame, _DETAILS_COLUMNS - {"Body Item Label"}), rule_rows,
                      header, path, warnings, print_details_all="Body Item Label" in header,
                      wanted=wanted)
    if "Body Item Label" not in header:  # that form interleaves prose and mini-tables
        _warn_skipped(other, path, warnings)
    return report


def _warn_unknown(header: list[str], known: set[str], path: Path, warnings: list[str]) -> None:
    """Name the columns ignored (after reading: a cut last line is warned about first)."""
    unknown = _unknown_columns(header, known)
    if unknown:
        warnings.append(f"{path.name}: ignored unknown column(s) "
                        + ", ".join(repr(c[:40]) for c in unknown[:5])
                        + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""))


def _with_columns(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """Add the optional columns an export lacks, empty (a --metrics run has no rule columns)."""
    for col in list(columns) + list(_IDENTITY) + list(_SHAPE):
        if col not in frame.columns:
            frame[col] = pd.Categorical([""] * len(frame))
    return frame


def _warn_skipped(lines: tuple[int, str], path: Path, warnings: list[str]) -> None:
    """Name what was skipped: how many lines, and the first one."""
    count, first = lines
    if count:
        warnings.append(f"{path.name}: skipped {count} malformed or non-data line(s), "
                        f"first: {first[:70]!r}")


# The rule rows' fields the rule table reads (the rest of a rule row repeats the launch's).
_RULE_FIELDS = ("ID", "Process ID", "Kernel Name", "Section Name", "Rule Name", "Rule Type",
                "Rule Description", "Estimated Speedup Type", "Estimated Speedup")


def _arrow_rows(chunks, header: list[str], width: int, path: Path,
                ) -> tuple[pd.DataFrame, dict[str, list[str]], tuple[int, str]]:
    """Parse rows ``width`` fields wide with pyarrow's CSV reader, one chunk at a time.

    Repeated columns (names, sections, units) become categoricals. Rows of the full header
    width (rule rows) come back as columns of :data:`_RULE_FIELDS`, in file order, each
    distinct text held once; other lines (prose and inline tables of ``--print-details
    all``, malformed rows) are counted and skipped (the count and the first line returned).
    """
    names = _unique(header)[:width]
    if width < len(header):
        names[-1] = "_trail"  # metric rows end with one empty field after "Metric Value"
    long_rows: list[str] = []
    other = [0, ""]

    def keep_long(row) -> str:
        if row.actual_columns == len(header) and width != len(header):
            long_rows.append(row.text)
        else:
            other[0] += 1
            other[1] = other[1] if other[0] > 1 else row.text
        return "skip"

    value_cols = {"Metric Value", "Minimum", "Maximum", "Average", "_trail"}
    types = {c: (pa.string() if c in value_cols else pa.dictionary(pa.int32(), pa.string()))
             for c in names}
    where = {f: header.index(f) for f in _RULE_FIELDS if f in header}
    rules: dict[str, list[str]] = {f: [] for f in _RULE_FIELDS}
    seen: dict[str, str] = {}  # one object per distinct text (descriptions repeat)
    tables = []
    for chunk in chunks:
        try:
            table = pacsv.read_csv(
                pa.py_buffer(chunk),
                # One thread: the handler collects rule rows, and threads parsing blocks at
                # once called it out of file order (ncu's rule results came out in a random
                # order).
                read_options=pacsv.ReadOptions(column_names=names, use_threads=False,
                                               block_size=_block_size(chunk)),
                parse_options=pacsv.ParseOptions(invalid_row_handler=keep_long),
                convert_options=pacsv.ConvertOptions(column_types=types,
                                                     strings_can_be_null=False,
                                                     quoted_strings_can_be_null=False),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            if "Empty CSV" in str(exc):
                continue  # a chunk of empty lines
            raise _csv_error(path, exc) from None
        tables.append(table)
        for row in csv.reader(long_rows):
            if len(row) == len(header):
                for f, column in rules.items():
                    text = row[where[f]] if f in where else ""
                    column.append(seen.setdefault(text, text))
        long_rows.clear()
    if not tables:
        raise ReportParseError(f"{path}: the CSV header has no data rows")
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    del tables
    frame = table.to_pandas()
    del table
    pa.default_memory_pool().release_unused()
    return frame, rules, (other[0], other[1])


def _block_size(body: bytes) -> int:
    """Return a block size above the longest line.

    Arrow fails on a row that straddles two blocks, and a failed multithreaded read can leave
    its thread pool hanging at exit.
    """
    ends = np.flatnonzero(np.frombuffer(body, dtype=np.uint8) == 10)
    longest = int(np.diff(ends, prepend=-1).max()) if len(ends) else len(body)
    longest = max(longest, len(body) - (int(ends[-1]) + 1 if len(ends) else 0))
    return max(1 << 20, 2 * longest + 1024)


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


def launch_table(first: pd.DataFrame, frame_columns, path: Path,
                  warnings: list[str] | None = None, row_kind: str = "row") -> pd.DataFrame:
    """Build LAUNCH_COLUMNS from the first row of each launch."""
    first = first.astype(object).where(first.notna(), None)
    out = pd.DataFrame({"launch": np.arange(len(first))})
    out["source"] = path_text(path)
    out["form"] = None
    for col, name in _IDENTITY.items():
        out[name] = first[col].astype(str).to_numpy() if col in first else None
    for col in ("id", "process_id", "device", "context", "stream"):
        text = out[col]
        out[col] = safe_ints(text).to_numpy()
        odd = out[col].isna().to_numpy() & text.notna().to_numpy() & (
            text.astype(str).str.strip().ne("").to_numpy())
        if odd.any() and warnings is not None and col in ("id", "process_id"):
            i = int(np.flatnonzero(odd)[0])
            what = col.replace("_", " ")
            warnings.append(f"{path.name}: {int(odd.sum())} launch(es) with a {what} "
                            f"that is not a whole number (first: {row_kind} {i + 1}, "
                            f"{str(text.iloc[i])[:30]!r}); kept without it")
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


def finish_report(launches: pd.DataFrame, metrics: pd.DataFrame, rules: pd.DataFrame,
                  path: Path, warnings: list[str] | None = None) -> Report:
    """The Report of one export from its three tables (shared by the CSV and text readers).

    A metric whose base unit is fixed (:data:`~ncu_advisor.units.EXPECTED_BASE`) but comes in
    another unit (an emptied unit, a unit of another kind) is read as missing, with a warning.
    """
    if launches.empty:
        raise ReportParseError(f"{path}: no profiled launches in this export")
    for name, base in EXPECTED_BASE.items():
        rows = np.flatnonzero((metrics["metric"] == name).to_numpy())
        if not len(rows):
            continue
        # Only these rows: the whole unit column as objects was ~130 MB at 150 MB of export.
        units = metrics["unit"].iloc[rows].astype(object).to_numpy()
        odd = rows[(units != base) & metrics["value"].iloc[rows].notna().to_numpy()]
        if len(odd):
            unit = metrics["unit"].iloc[odd[0]]
            metrics.iloc[odd, metrics.columns.get_loc("value")] = np.nan
            if warnings is not None:
                warnings.append(f"{path.name}: {len(odd)} value(s) of {name} in unit "
                                f"{unit!r}, not {base!r}: read as missing")
    # Two columns only: filtering the whole frame took every text too (~70 MB at 1 GB).
    duration = metrics.loc[(metrics["metric"] == DURATION).to_numpy(), ["launch", "value"]
                           ].drop_duplicates("launch")
    launches["duration_ns"] = launches["launch"].map(
        duration.set_index("launch")["value"]).astype("float64")
    launches = launches[LAUNCH_COLUMNS + [c for c in launches.columns if c not in LAUNCH_COLUMNS]]
    return Report(launches=launches.reset_index(drop=True), metrics=metrics.reset_index(drop=True),
                  ncu_rules=rules.reset_index(drop=True), sources=[path_text(path)])


def keep_metrics(metrics: pd.DataFrame, wanted: Iterable[str] | None,
                 seen: set[str] | None = None) -> pd.DataFrame:
    """The rows of ``wanted`` metric names (None: all), unresolved labels and non-numbers.

    Texts that are not numbers stay (the validity lint names every metric exported as
    ``n/a``), and the first row of every metric name (it tells the sections collected from
    the names present). Lean reading of a details page or text output, after labels are
    resolved: the analysis reads ~40% of their rows (a 1 GB page's long table was ~800 MB).
    ``seen``: the names of the blocks kept before (updated), for a table built by blocks.
    """
    if wanted is None:
        return metrics
    names = metrics["metric"]
    first = ~names.duplicated()
    if seen is not None:
        first &= ~names.isin(list(seen))
        seen.update(names[first].dropna())
    keep = (names.isin(wanted if isinstance(wanted, set | frozenset) else list(wanted))
            | names.isna() | metrics["value"].isna() | first).to_numpy()
    return metrics if keep.all() else metrics.iloc[np.flatnonzero(keep)].reset_index(drop=True)


def split_metric_names(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
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


def unit_column(values: pd.Series, units: pd.Series, metric: np.ndarray | None = None,
                path: Path | None = None, warnings: list[str] | None = None,
                fmt: NumberFormat | None = None,
                unknown: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Numbers in base units: one unit conversion per distinct unit string.

    The number format is the file's (``fmt``, or told from ``values``). A unit spelling the
    unit table does not know gives missing values, with a warning naming its metrics (or,
    with ``unknown``, its first rows as ``metric ('unit')`` texts added there, for a
    reader that converts block by block and warns once: :func:`unknown_units_warning`).
    """
    base = _per_category(units, lambda u: u.map(lambda x: normalize_unit(x)[0]))
    factor = _per_category(units, lambda u: u.map(lambda x: normalize_unit(x)[1])).astype(float)
    where = str(path) if path is not None else "input"
    parsed = parse_numbers(values, fmt, where)
    found = np.isnan(factor) & ~np.isnan(parsed)
    wanted = _UNKNOWN_SHOWN - len(unknown) if unknown is not None else _UNKNOWN_SHOWN
    if found.any() and (warnings is not None or unknown is not None) and wanted > 0:
        unit_text = np.asarray(units.astype(object) if hasattr(units, "astype") else units,
                               dtype=object)
        first = np.flatnonzero(found)[:wanted]
        rows = [f"{metric[i] if metric is not None else '?'} ({unit_text[i]!r})" for i in first]
        if unknown is not None:
            unknown.extend(rows)
        else:
            warnings.append(unknown_units_warning(path, rows))
    return parsed * factor, base


_UNKNOWN_SHOWN = 1000  # rows of unknown units looked at for the warning's names


def unknown_units_warning(path: Path | None, rows: list[str]) -> str:
    """The warning on values in unknown units, from their first rows' ``metric ('unit')``."""
    seen = pd.unique(pd.Series(rows))
    name = path.name if path is not None else "input"
    return (f"{name}: unknown unit(s), values read as missing: "
            + ", ".join(str(x)[:80] for x in seen[:3])
            + (f" and {len(seen) - 3} more" if len(seen) > 3 else ""))


def _details(frame: pd.DataFrame, rule_rows: dict[str, list[str]], header: list[str],
             path: Path, warnings: list[str], print_details_all: bool,
             wanted: Iterable[str] | None = None) -> Report:
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
    frame, launch_of, first = _repeated_ids(frame, launch_of, first, path, warnings)
    launch_of, first = _in_id_order(frame, launch_of, first)
    launches = launch_table(frame.iloc[first], frame.columns, path)
    label, metric = split_metric_names(frame["Metric Name"])
    fmt = number_format(frame["Metric Value"].array, str(path))
    values, units = unit_column(frame["Metric Value"], frame["Metric Unit"],
                                np.where(pd.isna(metric), label, metric), path, warnings, fmt)
    values = _finite(values, metric, launch_of, path, warnings)
    metrics = pd.DataFrame({
        "launch": launch_of,
        "section": frame["Section Name"].array,
        "body_item": frame["Body Item Label"].array if print_details_all else "",
        "metric": metric, "label": label, "unit": units, "value": values,
        "text": frame["Metric Value"].array,
    })
    metrics = keep_metrics(resolve_labels(metrics)[METRIC_COLUMNS], wanted)
    rules = _rule_table(rule_rows, header, launches, fmt)
    return finish_report(launches, metrics, rules, path, warnings)


def _repeated_ids(frame: pd.DataFrame, launch_of: np.ndarray, first: np.ndarray, path: Path,
                  warnings: list[str]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Keep two launches that share one ncu ID apart; drop a launch repeated whole.

    A launch lists its (section, metric) rows once each (a chart's table a fixed number of
    times), so every metric listed k times over under one ID, process and name means k
    launches (a repeated ID) or one launch k times (a page given twice): the i-th listing of
    each metric belongs to the i-th launch. One identical
    to the first is skipped, as the raw reader skips a repeated row; another is kept as a
    launch of its own. Both are warned about.
    """
    cols = [c for c in ("Section Name", "Metric Name", "Body Item Label") if c in frame]
    keys = pd.DataFrame({"launch": launch_of,
                         **{c: frame[c].cat.codes.to_numpy() if isinstance(
                             frame[c].dtype, pd.CategoricalDtype) else frame[c].to_numpy()
                            for c in cols}})
    by_metric = keys.groupby(list(keys.columns), sort=False)
    occurrence = by_metric.cumcount().to_numpy()
    if not len(occurrence) or occurrence.max() == 0:
        return frame, launch_of, first
    # Some sections list one name several times (the roofline chart's tables), so the copies
    # of a launch are the fewest times any of its metrics is listed.
    count = by_metric["launch"].transform("size").to_numpy()
    copies = pd.Series(count).groupby(launch_of).transform("min").to_numpy()
    if copies.max() == 1:
        return frame, launch_of, first
    occurrence = np.minimum(occurrence // np.maximum(count // copies, 1), copies - 1)
    width = int(occurrence.max()) + 1
    sub, uniques = pd.factorize(launch_of.astype(np.int64) * width + occurrence, sort=False)
    # What each listing says: an order-free hash of its rows, to tell a repeat from a launch.
    row_hash = pd.util.hash_pandas_object(pd.DataFrame({
        c: frame[c].astype(str).to_numpy() for c in (*cols, "Metric Value")}),
        index=False).to_numpy()
    signature = pd.DataFrame({"sub": sub, "h": row_hash}).groupby("sub")["h"].agg(
        lambda h: (int(np.bitwise_xor.reduce(h.to_numpy())), len(h)))
    base_of = uniques // width
    occ_of = uniques % width
    sig = signature.reindex(np.arange(len(uniques))).to_numpy()
    sig_first = {int(b): sig[i] for i, (b, o) in enumerate(zip(base_of, occ_of, strict=True))
                 if o == 0}
    repeat = np.array([o > 0 and sig[i] == sig_first.get(int(b)) for i, (b, o)
                       in enumerate(zip(base_of, occ_of, strict=True))], dtype=bool)
    ids = frame["ID"].astype(str).to_numpy()
    if repeat.any():
        warnings.append(f"{path.name}: skipped {int(repeat.sum())} repeated launch(es) (the "
                        "same rows again under one ID: a page given twice?)")
    shared = (occ_of > 0) & ~repeat
    if shared.any():
        firsts = np.full(len(uniques), -1, dtype=np.int64)
        firsts[sub[::-1]] = np.arange(len(sub))[::-1]
        named = sorted({ids[firsts[i]] for i in np.flatnonzero(shared)}, key=str)
        warnings.append(f"{path.name}: ncu ID(s) {', '.join(named[:5])} name more than one "
                        "launch (repeated IDs); kept as separate launches")
    keep_rows = ~repeat[sub]
    frame = frame[keep_rows]
    kept_subs = np.flatnonzero(~repeat)
    renumber = np.full(len(uniques), -1, dtype=np.int64)
    renumber[kept_subs] = np.arange(len(kept_subs))
    launch_of = renumber[sub[keep_rows]]
    first = np.full(len(kept_subs), -1, dtype=np.int64)
    first[launch_of[::-1]] = np.arange(len(launch_of))[::-1]
    return frame, launch_of, first


def _in_id_order(frame: pd.DataFrame, launch_of: np.ndarray,
                 first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number launches in ncu's ID order (ncu writes them so), not in order of rows.

    Rows shuffled (a sort in a spreadsheet) must not renumber launches: fusion and other
    sequence findings read launch order. A page with a launch without a numeric ID keeps
    the order of its rows.
    """
    ids = safe_ints(frame["ID"].to_numpy()[first]).to_numpy(dtype="float64", na_value=np.nan)
    if len(ids) < 2 or np.isnan(ids).any() or np.all(np.diff(ids) >= 0):
        return launch_of, first
    order = np.argsort(ids, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[launch_of], first[order]


def _rule_table(rule_rows: dict[str, list[str]], header: list[str], launches: pd.DataFrame,
                fmt: NumberFormat | None = None) -> pd.DataFrame:
    """Ncu's rule rows (the few complete rows of a details export)."""
    if not rule_rows["Rule Name"] or "Rule Name" not in header:
        return pd.DataFrame(columns=RULE_COLUMNS)
    rows = pd.DataFrame(rule_rows, dtype=object)
    rows = rows[rows["Rule Name"].ne("")]
    ident: dict[tuple, list[int]] = {}
    for i, p, n, launch in zip(launches["id"], launches["process_id"], launches["name"],
                               launches["launch"], strict=True):
        ident.setdefault((str(i), str(p), n), []).append(launch)
    # Launches sharing one ID (kept apart by the reader): the k-th result of a rule goes to
    # the k-th of them.
    by_rule = rows.groupby(["ID", "Process ID", "Kernel Name", "Section Name", "Rule Name"],
                           sort=False)
    nth = by_rule.cumcount().to_numpy()
    count = by_rule["Rule Name"].transform("size").to_numpy()
    launch = []
    for i, p, n, k, c in zip(rows["ID"], rows["Process ID"], rows["Kernel Name"], nth, count,
                             strict=True):
        found = ident.get((i, p, n), [])
        launch.append(found[min(k // max(c // len(found), 1), len(found) - 1)] if found
                      else None)
    rows = rows.assign(_launch=launch).dropna(subset=["_launch"])
    return pd.DataFrame({
        "launch": rows["_launch"].astype(int).to_numpy(),
        "section": rows["Section Name"].to_numpy(),
        "rule": rows["Rule Name"].to_numpy(),
        "type": rows["Rule Type"].to_numpy(),
        "title": None,  # the CSV keeps only the rule id, not the message title
        "description": repeated_texts(rows["Rule Description"].to_numpy()),
        "speedup_type": rows["Estimated Speedup Type"].replace("", None).to_numpy(),
        "speedup": finite_or_nan(parse_numbers(rows["Estimated Speedup"], fmt))[0],
    }).drop_duplicates(ignore_index=True)  # a launch's rule rows again (a page given twice)


def _raw_stream(stream, header: list[str], path: Path, warnings: list[str],
                wanted: Iterable[str] | None, texts: Iterable[str] | None = None) -> Report:
    """Raw page: one row per launch, one column per metric, a units row under the header.

    Read in blocks with pyarrow's streaming reader, keeping only the identity columns and the
    wanted metric columns; each block's metric columns become the long table with one
    reshape (launch-major), so cost and memory follow launches x kept columns.
    """
    names = _unique(header)
    ident = [c for c in names if c in _IDENTITY or c in _SHAPE or _is_nvtx_column(c)]
    keep = None if wanted is None else set(wanted)
    metric_cols = [c for c in names if c not in ident and (keep is None or c in keep)]
    skipped_rows = [0, None]

    def skip(row) -> str:
        skipped_rows[0] += 1
        if skipped_rows[1] is None:
            skipped_rows[1] = row.text
        return "skip"

    block = max(1 << 20, 4 * sum(map(len, header)))
    try:
        reader = pacsv.open_csv(
            pa.PythonFile(stream, mode="r"),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False,
                                           block_size=block),
            parse_options=pacsv.ParseOptions(invalid_row_handler=skip),
            convert_options=pacsv.ConvertOptions(
                include_columns=ident + metric_cols,
                column_types={c: pa.string() for c in ident + metric_cols},
                strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
        batches = iter(reader)
        first = next(batches, None)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, EOFError, zlib.error) as exc:
        raise _csv_error(path, exc) from None
    if first is None or first.num_rows == 0:
        raise ReportParseError(f"{path}: the CSV header has no data rows")
    units = [""] * len(metric_cols)
    if first.column("ID")[0].as_py() == "":
        units = [first.column(c)[0].as_py() for c in metric_cols]
        first = first.slice(1)
    else:
        warnings.append(f"{path.name}: raw page without a units row; values taken as exported")
    factors = np.array([normalize_unit(u)[1] for u in units], dtype=np.float64)
    base_units = [normalize_unit(u)[0] for u in units]
    _check_raw_units(metric_cols, units, base_units, factors, path, warnings)
    # Per column: whether its numbers keep their text (all, unless lean texts were asked).
    texts_kept = (None if wanted is None or texts is None
                  else np.isin(np.asarray(metric_cols, dtype=object), list(texts)))
    idents: list[pa.RecordBatch] = []
    text_blocks: list[pa.Array] = []
    values = _RowBuffer(len(metric_cols))
    bad_cells: list[tuple[int, str]] = []
    fmt: NumberFormat | None = None
    not_launches = 0
    try:
        for batch in _chain_batches(first, batches):
            batch, dropped = _drop_header_rows(batch)
            not_launches += dropped
            if batch.num_rows == 0:
                continue
            if fmt is None and metric_cols:
                fmt = number_format(pa.concat_arrays([batch.column(c) for c in metric_cols]),
                                    str(path))
            idents.append(batch.select(ident))
            v, t = _raw_block(batch, metric_cols, factors, texts_kept, fmt, str(path))
            inf_rows, inf_cols = np.nonzero(np.isinf(v))
            if len(inf_rows):
                bad_cells.extend((values.rows + int(r), metric_cols[int(c)])
                                 for r, c in zip(inf_rows[:3], inf_cols[:3], strict=True))
                v[np.isinf(v)] = np.nan
            values.append(v)
            text_blocks.append(t)
            if len(text_blocks) % 64 == 0:  # Arrow's pool keeps the parsed blocks' memory otherwise
                pa.default_memory_pool().release_unused()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, EOFError, zlib.error) as exc:
        raise _csv_error(path, exc) from None
    n_rows = values.rows
    if not_launches:
        warnings.append(f"{path.name}: skipped {not_launches} repeated header or units row(s) "
                        "(a page given twice?)")
    if skipped_rows[0]:
        warnings.append(f"{path.name}: skipped {skipped_rows[0]} malformed or non-data line(s), "
                        f"first: {skipped_rows[1][:70]!r}")
    if n_rows == 0:
        raise ReportParseError(f"{path}: no profiled launches in this export")
    if bad_cells:
        where = ", ".join(f"launch row {r + 1} {m}" for r, m in bad_cells[:3])
        warnings.append(f"{path.name}: number(s) beyond float range read as missing ({where})")
    frame = pa.Table.from_batches(idents).to_pandas()
    del idents
    launches = launch_table(frame, frame.columns, path, warnings, "launch row")
    m = len(metric_cols)
    table = values.finish()  # launch x metric: the long table's values, row by row
    metric_names = pd.Index(metric_cols, dtype=object)
    metrics = pd.DataFrame({
        "launch": np.repeat(np.arange(n_rows, dtype=np.int32), m),
        "section": _empty_category(n_rows * m),
        "metric": pd.Categorical.from_codes(
            np.tile(np.arange(m, dtype=_code_dtype(m)), n_rows), categories=metric_names),
        "label": _empty_category(n_rows * m),
        "unit": _codes_of(base_units, n_rows),
        "value": table.reshape(-1),
        # Texts stay in Arrow memory (one buffer, not a Python string per cell).
        "text": pd.arrays.ArrowExtensionArray(pa.chunked_array(text_blocks, type=pa.string())),
    }, copy=False)
    # A launch row again (a page given twice): skipped. Another launch under the same ID,
    # process and name (a repeated ID) is kept apart, with a warning.
    key_cols = [c for c in ("ID", "Process ID", "Kernel Name") if c in frame]
    dup = frame.duplicated(key_cols).to_numpy() & launches["id"].notna().to_numpy()
    if dup.any():
        group = frame.groupby(key_cols, sort=False, observed=True, dropna=False).ngroup()
        first_row = pd.Series(np.arange(n_rows)).groupby(group.to_numpy()).transform("min")
        first_row = first_row.to_numpy()
        same = np.array([np.array_equal(table[i], table[first_row[i]], equal_nan=True)
                         if dup[i] else False for i in range(n_rows)]) if m else dup.copy()
        if (dup & ~same).any():
            named = sorted({str(x) for x in frame["ID"].to_numpy()[dup & ~same]})
            warnings.append(f"{path.name}: ncu ID(s) {', '.join(named[:5])} name more than one "
                            "launch (repeated IDs); kept as separate launches")
        dup &= same
    ids = launches["id"].to_numpy(dtype="float64", na_value=np.nan)
    order = np.arange(n_rows)
    if n_rows > 1 and not np.isnan(ids).any() and not np.all(np.diff(ids[~dup]) >= 0):
        order = np.argsort(ids, kind="stable")  # ncu's ID order, not the rows' (shuffled)
    if dup.any() or not np.array_equal(order, np.arange(n_rows)):
        if dup.any():
            warnings.append(f"{path.name}: skipped {int(dup.sum())} repeated launch row(s)")
        keep_rows = order[~dup[order]]
        new_of = np.full(n_rows, -1, dtype=np.int64)
        new_of[keep_rows] = np.arange(len(keep_rows))
        launches = launches.iloc[keep_rows].assign(launch=np.arange(len(keep_rows)))
        metrics = metrics[~np.repeat(dup, m)]
        metrics = metrics.assign(launch=new_of[metrics["launch"].to_numpy()])
        metrics = metrics.sort_values("launch", kind="stable")
        table = table[keep_rows] if m else None
    report = finish_report(launches, metrics.reset_index(drop=True),
                     pd.DataFrame(columns=RULE_COLUMNS), path)
    if table is not None and m:
        # The page is already launch x metric: the wide view is the same array, not a copy.
        report.set_wide(pd.DataFrame(table, index=pd.Index(report.launches["launch"],
                                                           name="launch"),
                                     columns=metric_names.rename("metric"), copy=False))
    return report


def _chain_batches(first, rest):
    yield first
    yield from rest


def _csv_error(path: Path, exc: BaseException) -> ReportParseError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "straddl" in text:
        text = "a line is longer than any row ncu writes"
    if "Empty CSV" in text:
        return ReportParseError(f"{path}: the CSV header has no data rows")
    if "UTF8" in text or "UTF-8" in text:
        return ReportParseError(f"{path}: not UTF-8 text; re-export it with ncu --csv")
    return ReportParseError(f"{path}: malformed CSV ({text})")


def _drop_header_rows(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, int]:
    """Drop the rows of a raw page that are its header or units row again (never launches).

    A page given twice repeats its header (``"ID","Kernel Name"``) and units row (no ID, no
    name); a units row may also be repeated alone.
    """
    ids, names = batch.column("ID"), batch.column("Kernel Name")
    header = pc.and_(pc.equal(ids, "ID"), pc.equal(names, "Kernel Name"))
    units = pc.and_(pc.equal(pc.utf8_trim_whitespace(ids), ""), pc.equal(names, ""))
    drop = pc.or_(header, units)
    n = pc.sum(drop).as_py() or 0
    return (batch.filter(pc.invert(drop)), n) if n else (batch, 0)


def _check_raw_units(metric_cols: list[str], units: list[str], base_units: list[str],
                     factors: np.ndarray, path: Path, warnings: list[str]) -> None:
    """Unknown unit spellings, and fixed-unit metrics in another unit: missing, named."""
    unknown = [f"{c} ({u!r})" for c, u, f in zip(metric_cols, units, factors, strict=True)
               if np.isnan(f)]
    if unknown:
        warnings.append(f"{path.name}: unknown unit(s), values read as missing: "
                        + ", ".join(x[:80] for x in unknown[:3])
                        + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""))
    for i, col in enumerate(metric_cols):
        expected = EXPECTED_BASE.get(col)
        if expected is not None and base_units[i] != expected and not np.isnan(factors[i]):
            factors[i] = np.nan
            warnings.append(f"{path.name}: {col} in unit {units[i]!r}, not {expected!r}: read "
                            "as missing")


def _raw_block(batch: pa.RecordBatch, metric_cols: list[str], factors: np.ndarray,
               texts_kept: np.ndarray | None = None, fmt: NumberFormat | None = None,
               where: str = "input") -> tuple[np.ndarray, pa.Array]:
    """One block of raw rows -> (values as rows x metrics in base units, texts launch-major).

    ``texts_kept``: per column, whether a number keeps its text (None: every text kept);
    elsewhere only the texts that are not numbers are (strings, ``n/a``).
    """
    k, m = batch.num_rows, len(metric_cols)
    if m == 0:
        return np.empty((k, 0)), pa.array([], type=pa.string())
    # All metric columns end to end (metric-major), parsed in one pass of Arrow kernels.
    flat = pa.concat_arrays([batch.column(c) for c in metric_cols])
    with np.errstate(over="ignore", invalid="ignore"):
        parsed = parse_numbers(flat, fmt, where).reshape(m, k)
        v = parsed * factors[:, None]
    order = np.arange(m * k).reshape(m, k).T.ravel()  # launch-major: launch, then metric
    # A masked index takes a null: only the texts kept are copied.
    dropped = None if texts_kept is None else ~(np.isnan(parsed) | texts_kept[:, None]).T.ravel()
    return np.ascontiguousarray(v.T), flat.take(pa.array(order, mask=dropped))


class _RowBuffer:
    """Rows of floats appended block by block into one array, grown in place.

    A list of blocks joined at the end held the values twice at that moment (~50 MB at 1 GB
    of export). Growth goes through ``realloc``, which moves a large buffer's pages without
    copying them, and pages past the last row are never touched (no resident memory).
    """

    def __init__(self, width: int) -> None:
        self.rows = 0
        self._array = np.empty((1024, width))

    def append(self, block: np.ndarray) -> None:
        end = self.rows + len(block)
        if end > len(self._array):
            self._array.resize((max(end, 2 * len(self._array)), self._array.shape[1]),
                               refcheck=False)
        self._array[self.rows:end] = block
        self.rows = end

    def finish(self) -> np.ndarray:
        """The rows appended (the buffer trimmed to them)."""
        self._array.resize((self.rows, self._array.shape[1]), refcheck=False)
        return self._array


def _code_dtype(n: int) -> type:
    """The smallest integer type pandas would keep category codes of ``n`` categories in."""
    return np.int8 if n < 127 else np.int16 if n < 32767 else np.int32


def _empty_category(n: int) -> pd.Categorical:
    return pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8),
                                     categories=pd.Index([], dtype=object))


def _codes_of(per_column: list[str], n_rows: int) -> pd.Categorical:
    cats, codes = np.unique(np.asarray(per_column, dtype=object).astype(str), return_inverse=True)
    return pd.Categorical.from_codes(np.tile(codes.astype(_code_dtype(len(cats))), n_rows),
                                     categories=pd.Index(cats, dtype=object))


def _finite(values: np.ndarray, metric: np.ndarray, launch_of: np.ndarray, path: Path,
            warnings: list[str]) -> np.ndarray:
    """Numbers beyond float range become NaN, with a warning naming the first cells."""
    values, bad = finite_or_nan(values)
    if bad.any():
        where = ", ".join(f"launch {int(launch_of[i])} {metric[i]}"
                          for i in np.flatnonzero(bad)[:3])
        warnings.append(f"{path.name}: {int(bad.sum())} number(s) beyond float range read as "
                        f"missing ({where})")
    return values


def _summary(frame: pd.DataFrame, path: Path, warnings: list[str]) -> Report:
    """Per-kernel summary: one launch row per kernel name and shape, with invocations."""
    frame = frame[_valid_rows(frame, "Process ID")]
    key_cols = ["Process ID", "Kernel Name", "Block Size", "Grid Size", "Device", "CC"]
    launch_of, first = _row_keys(frame, key_cols)
    launches = launch_table(frame.iloc[first], frame.columns, path)
    launches["id"] = pd.array([pd.NA] * len(launches), dtype="Int64")  # summaries have no IDs
    launches["invocations"] = safe_ints(frame["Invocations"].iloc[first]).fillna(1).to_numpy()
    label, metric = split_metric_names(frame["Metric Name"])
    fmt = number_format(frame["Average"].array, str(path))
    named = np.where(pd.isna(metric), label, metric)
    avg, units = unit_column(frame["Average"], frame["Metric Unit"], named, path, warnings, fmt)
    lo, _ = unit_column(frame["Minimum"], frame["Metric Unit"], fmt=fmt, path=path)
    hi, _ = unit_column(frame["Maximum"], frame["Metric Unit"], fmt=fmt, path=path)
    avg = _finite(avg, metric, launch_of, path, warnings)
    lo, _ = finite_or_nan(lo)
    hi, _ = finite_or_nan(hi)
    metrics = pd.DataFrame({
        "launch": launch_of, "section": frame["Section Name"].astype(str).to_numpy(dtype=object),
        "body_item": "", "metric": metric, "label": label, "unit": units, "value": avg,
        "text": frame["Average"].to_numpy(dtype=object), "minimum": lo, "maximum": hi,
    })
    metrics = resolve_labels(metrics)
    metrics = metrics[METRIC_COLUMNS + ["minimum", "maximum"]]
    return finish_report(launches, metrics, pd.DataFrame(columns=RULE_COLUMNS), path, warnings)


def _session_from_preamble(preamble: list[str]) -> dict:
    """Facts a live run prints before the CSV (clock control, metrics it could not collect)."""
    facts: dict = {}
    prof = [ln for ln in preamble if ln.startswith("==")]
    if prof:
        facts["ncu_messages"] = prof
    if any("unmodified GPU clocks" in ln for ln in prof):
        facts["clock_control"] = "none"
    return facts
