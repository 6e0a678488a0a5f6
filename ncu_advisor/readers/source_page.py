"""Source-level counters: the ``--page source`` CSV export, and the per-PC metrics of a report.

The per-PC metrics of a ``.ncu-rep`` are read by ``ncu_rep_child.source_lines_of_action``
into the same table.

Both give one row per SASS instruction with the CUDA line it came from (kernels built with
``-lineinfo``). They become the Report's ``source_lines`` table, one row per (launch, line,
instruction), with the counters under the names of ``SOURCE_LINE_COLUMNS``.

A source page export (``ncu --import R.ncu-rep --csv --page source --print-source cuda,sass``)
holds one table per profiled launch, each opened by ``"File Path"`` and ``"Function Name"``
lines and its own header (the column set differs between kernels; ``Source`` appears twice:
the CUDA text, then the SASS text). CUDA line rows carry ``Line No`` and the sums over their
instructions; the instruction rows under them carry the address and the SASS text; ``...``
rows mark gaps. The page names no launch ID, so the tables are matched to the launches of
the details or raw export read with it: by function name, in order.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ReportParseError
from .common import parse_numbers, read_input_bytes, read_prefix

# The columns every source_lines table has (stall_* columns are added per reason found).
SOURCE_LINE_COLUMNS = [
    "launch", "function", "file", "line", "address", "sass", "inst_executed",
    "thread_inst_executed", "samples", "address_space", "access", "divergent_branches",
    "l2_sectors_global", "l2_sectors_global_ideal", "l2_sectors_global_excessive",
    "shared_nway",
]
# Source page column -> our column.
_CSV_COLUMNS = {
    "Instructions Executed": "inst_executed",
    "Thread Instructions Executed": "thread_inst_executed",
    "Warp Stall Sampling (All Samples)": "samples",
    "Address Space": "address_space",
    "Access Operation": "access",
    "Divergent Branches": "divergent_branches",
    "L2 Theoretical Sectors Global": "l2_sectors_global",
    "L2 Theoretical Sectors Global Ideal": "l2_sectors_global_ideal",
    "L2 Theoretical Sectors Global Excessive": "l2_sectors_global_excessive",
    "L1 Conflicts Shared N-Way": "shared_nway",
}
_TEXT_COLUMNS = ("address_space", "access")
_SOURCE_PAGE_START = b'"File Path",'


def is_source_page(path: Path) -> bool:
    """Tell a ``--page source`` CSV export by its first line."""
    try:
        head = read_prefix(path, 64)
    except OSError:
        return False
    return head.lstrip(b"\xef\xbb\xbf").startswith(_SOURCE_PAGE_START)


def _address(text: str) -> int | None:
    """An instruction address ``0x...`` as an integer (None: not hex or beyond 63 bits)."""
    try:
        value = int(text, 16)
    except ValueError:
        return None
    return value if value < 1 << 63 else None


def empty_source_lines() -> pd.DataFrame:
    """An empty ``source_lines`` table (inputs without source-level counters)."""
    return pd.DataFrame(columns=SOURCE_LINE_COLUMNS)


def read_source_page(path: Path) -> pd.DataFrame:
    """Read a source page export into rows of ``SOURCE_LINE_COLUMNS``.

    ``launch`` holds the table's position in the file (0, 1, ...) until
    :func:`attach_source_lines` maps it to a launch of the Report.

    Raises:
        ReportParseError: the file is not a source page or holds no instruction rows.

    """
    text = read_input_bytes(path).decode("utf-8-sig", errors="replace")
    rows = list(csv.reader(io.StringIO(text)))
    records: list[dict] = []
    table, header, file_path, function, line = -1, None, None, None, None
    for row in rows:
        if not row:
            continue
        head = row[0]
        if head == "File Path" and len(row) == 2:
            file_path, header = row[1], None
            continue
        if head == "Function Name" and len(row) == 2:
            function, table, header, line = row[1], table + 1, None, None
            continue
        if head == "Line No":
            header = row
            continue
        if header is None or len(row) != len(header):
            continue
        if head:  # a CUDA line: its sums are repeated on its instructions
            # A line number beyond 64 bits is no source line (it would overflow the table).
            line = int(head) if head.isdigit() and len(head) <= 18 else None
            continue
        address = row[2]
        if not address.startswith("0x") or line is None or _address(address) is None:
            continue  # "..." gaps, instructions without line information
        record = {"launch": table, "function": function, "file": file_path, "line": line,
                  "address": _address(address), "sass": row[3].strip()}
        for col, value in zip(header[4:], row[4:], strict=True):
            name = _CSV_COLUMNS.get(col)
            if name is None and col.startswith("stall_") and "(" not in col:
                name = col
            if name is not None:
                record[name] = value
        records.append(record)
    if table < 0:
        raise ReportParseError(f"{path}: not a source page export (no \"Function Name\" line)")
    if not records:
        raise ReportParseError(f"{path}: the source page has no instruction rows with line "
                               "numbers (build the kernels with -lineinfo)")
    frame = pd.DataFrame.from_records(records)
    return _typed(frame)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as floats (``-`` becomes NaN), text columns as exported, fixed column order."""
    for col in frame.columns:
        if col in ("launch", "line", "address"):
            frame[col] = frame[col].astype(np.int64)
        elif col in _TEXT_COLUMNS:
            frame[col] = frame[col].where(frame[col].ne("-"), None)
        elif col not in ("function", "file", "sass"):
            frame[col] = parse_numbers(frame[col].astype(str))
    for col in SOURCE_LINE_COLUMNS:
        if col not in frame:
            frame[col] = None if col in _TEXT_COLUMNS else np.nan
    stalls = sorted(c for c in frame.columns if c.startswith("stall_"))
    return frame[SOURCE_LINE_COLUMNS + stalls].reset_index(drop=True)


def source_lines_frame(rows: list[dict]) -> pd.DataFrame:
    """A ``source_lines`` table from row dicts (empty when there are none)."""
    if not rows:
        return empty_source_lines()
    frame = pd.DataFrame.from_records(rows)
    for col in SOURCE_LINE_COLUMNS:
        if col not in frame:
            frame[col] = None if col in _TEXT_COLUMNS else np.nan
    stalls = sorted(c for c in frame.columns if c.startswith("stall_"))
    return frame[SOURCE_LINE_COLUMNS + stalls].reset_index(drop=True)


_PARAMS = re.compile(r"\(.*\)\s*$")


def _function_key(name: str) -> str:
    """A kernel's name without its parameter list (``f(int)`` and ``f`` match)."""
    return _PARAMS.sub("", str(name)).strip()


def attach_source_lines(launches: pd.DataFrame, pages: list[tuple[Path, pd.DataFrame]],
                        ) -> tuple[pd.DataFrame, list[str]]:
    """Map each source page table to a launch: same function name, in order of appearance.

    The k-th table of function F in a page goes to the k-th launch named F among the
    launches read from the same folder as the page (all launches when none share its
    folder). Returns the combined ``source_lines`` table and a warning per table left over.
    """
    warnings: list[str] = []
    parts = []
    for path, page in pages:
        same_dir = launches[[Path(str(s)).parent == path.parent for s in launches["source"]]]
        pool = same_dir if not same_dir.empty else launches
        # Several exports of one capture are merged into one launch: each launch once.
        by_name: dict[str, list[int]] = {}
        for launch, name, short in zip(pool["launch"], pool["name"], pool["short_name"],
                                       strict=True):
            keys = {_function_key(name), str(short)}
            for key in keys:
                by_name.setdefault(key, []).append(int(launch))
        used: dict[str, int] = {}
        mapping: dict[int, int] = {}
        for table, function in page.drop_duplicates("launch")[["launch", "function"]].itertuples(
                index=False):
            key = _function_key(function)
            candidates = by_name.get(key, [])
            k = used.get(key, 0)
            if k < len(candidates):
                mapping[int(table)] = candidates[k]
                used[key] = k + 1
            else:
                warnings.append(f"{path.name}: no launch of {function} to attach its source "
                                "lines to (read the source page with the details or raw "
                                "export of the same capture)")
        matched = page[page["launch"].isin(list(mapping))]
        parts.append(matched.assign(launch=matched["launch"].map(mapping)))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return empty_source_lines(), warnings
    return pd.concat(parts, ignore_index=True), warnings
