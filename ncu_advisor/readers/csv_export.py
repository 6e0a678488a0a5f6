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

from ..errors import ReportParseError
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report
from .common import (
    METRIC_NAME,
    nvtx_ranges,
    parse_numbers,
    parse_triples,
    short_name,
    to_base_units,
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
    raw = path.read_bytes()
    if not raw.strip():
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
    body = text[match.start():]
    warnings: list[str] = []
    lines = body.split("\n")
    header = next(csv.reader([lines[0]]))
    if not text.endswith("\n"):
        # ncu ends every line with a newline: a missing one means the file was cut short.
        warnings.append(f"{path.name}: the file ends mid-line (truncated?); its last line was "
                        "skipped")
        lines = lines[:-1]
    data_lines = [ln for ln in lines[1:] if ln.startswith('"')]
    other = [ln.strip() for ln in lines[1:] if ln.strip() and not ln.startswith('"')]
    frame = _parse_rows(data_lines, header, path, warnings)
    if "Invocations" in header:
        form = "summary"
        report = _summary(frame, path)
    elif "Metric Name" in header:
        form = "details"
        report = _details(frame, header, path, warnings, print_details_all="Body Item Label"
                          in header)
    else:
        form = "raw"
        report = _raw(frame, header, path, warnings)
    if other and form != "details":
        warnings.append(f"{path.name}: skipped {len(other)} non-CSV line(s) after the header, "
                        f"e.g. {other[0][:60]!r}")
    report.launches["form"] = form
    report.session.update(_session_from_preamble(preamble))
    report.warnings[:0] = warnings
    return report


def _parse_rows(lines: list[str], header: list[str], path: Path,
                warnings: list[str]) -> pd.DataFrame:
    """Parse the CSV body with pandas' C parser, every field as text."""
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


def _valid_rows(frame: pd.DataFrame, key: str) -> pd.Series:
    """Rows that belong to the table (drops inline mini-tables of ``--print-details all``)."""
    ok = frame[key].str.fullmatch(r"\d+", na=False)
    if "Process ID" in frame and key != "Process ID":
        ok &= frame["Process ID"].str.fullmatch(r"\d+", na=False)
    return ok


def _launch_table(frame: pd.DataFrame, key_cols: list[str], path: Path) -> pd.DataFrame:
    """Build LAUNCH_COLUMNS from the first row of each launch."""
    first = frame.drop_duplicates(subset=key_cols, keep="first")
    out = pd.DataFrame({"launch": np.arange(len(first))})
    out["source"] = str(path)
    out["form"] = None
    for col, name in _IDENTITY.items():
        out[name] = first[col].to_numpy() if col in first else None
    for col in ("id", "process_id", "device", "context", "stream"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("Int64")
    out["name"] = out["name"].astype(str)
    out["short_name"] = out["name"].map(short_name)
    for prefix, col in (("grid", "Grid Size"), ("block", "Block Size")):
        triples = parse_triples(first[col] if col in first else pd.Series([""] * len(first)))
        for i, axis in enumerate("xyz"):
            out[f"{prefix}_{axis}"] = triples[i].to_numpy()
    nvtx_col = next((c for c in frame.columns if c.startswith("thread Domain")), None)
    out["nvtx"] = first[nvtx_col].map(nvtx_ranges).to_numpy() if nvtx_col else None
    if nvtx_col:
        # --print-nvtx-rename kernel prefixes the range: "copies/copy_coalesced(...)".
        out["short_name"] = [
            short_name(n[len(r) + 1:]) if isinstance(r, str) and n.startswith(r + "/") else s
            for n, r, s in zip(out["name"], out["nvtx"], out["short_name"], strict=True)]
    out["duration_ns"] = np.nan
    out["invocations"] = 1
    return out, first


def _key_index(frame: pd.DataFrame, first: pd.DataFrame, key_cols: list[str]) -> np.ndarray:
    """Map every row to its launch number."""
    keys = pd.MultiIndex.from_frame(frame[key_cols])
    lookup = pd.MultiIndex.from_frame(first[key_cols])
    return lookup.get_indexer(keys)


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


def _details(frame: pd.DataFrame, header: list[str], path: Path, warnings: list[str],
             print_details_all: bool) -> Report:
    """Details page (any --print-metric-name / --print-units / --print-details variant)."""
    valid = _valid_rows(frame, "ID")
    dropped = int((~valid).sum())
    if dropped and not print_details_all:
        warnings.append(f"{path.name}: skipped {dropped} row(s) that are not launch rows")
    frame = frame[valid]
    key_cols = [c for c in ("ID", "Process ID", "Kernel Name") if c in frame]
    launches, first = _launch_table(frame, key_cols, path)
    launch_of = _key_index(frame, first, key_cols)

    has_rules = "Rule Name" in frame
    is_rule = frame["Rule Name"].ne("") & frame["Rule Name"].notna() if has_rules else \
        pd.Series(False, index=frame.index)
    mrows = frame[~is_rule & frame["Metric Name"].fillna("").ne("")]
    m_launch = launch_of[(~is_rule & frame["Metric Name"].fillna("").ne("")).to_numpy()]
    metric_text = mrows["Metric Name"].astype(str)
    split = metric_text.str.extract(_LABEL_NAME)
    is_name = metric_text.str.fullmatch(METRIC_NAME)
    label = split[0].where(split[0].notna(), metric_text.where(~is_name))
    name = split[1].where(split[1].notna(), metric_text.where(is_name))
    values, units = to_base_units(parse_numbers(mrows["Metric Value"]), mrows["Metric Unit"])
    metrics = pd.DataFrame({
        "launch": m_launch,
        "section": mrows["Section Name"].to_numpy(),
        "body_item": (mrows["Body Item Label"] if print_details_all else
                      pd.Series("", index=mrows.index)).to_numpy(),
        "metric": name.to_numpy(dtype=object),
        "label": label.to_numpy(dtype=object),
        "unit": units.to_numpy(),
        "value": values.to_numpy(),
        "text": mrows["Metric Value"].to_numpy(),
    })
    metrics = resolve_labels(metrics)
    metrics = metrics[METRIC_COLUMNS]

    if has_rules:
        rrows = frame[is_rule]
        rules = pd.DataFrame({
            "launch": launch_of[is_rule.to_numpy()],
            "section": rrows["Section Name"].to_numpy(),
            "rule": rrows["Rule Name"].to_numpy(),
            "type": rrows["Rule Type"].to_numpy(),
            "title": None,  # the CSV keeps only the rule id, not the message title
            "description": rrows["Rule Description"].to_numpy(),
            "speedup_type": rrows["Estimated Speedup Type"].replace("", None).to_numpy(),
            "speedup": parse_numbers(rrows["Estimated Speedup"]).to_numpy(),
        })
    else:
        rules = pd.DataFrame(columns=RULE_COLUMNS)
    return _finish(launches, metrics, rules, path)


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
    launches, first = _launch_table(frame, key_cols, path)
    ident = set(_IDENTITY) | {"Block Size", "Grid Size"}
    metric_cols = [c for c in frame.columns if c not in ident and not c.startswith(
        ("thread Domain", "Id:Domain"))]
    long = frame[metric_cols].set_axis(np.arange(len(frame))).melt(
        ignore_index=False, var_name="metric", value_name="text")
    launch = long.index.to_numpy()
    unit_text = long["metric"].map(units_row[metric_cols].to_dict())
    values, units = to_base_units(parse_numbers(long["text"]), unit_text)
    # PM-sampling columns keep their unit-group prefix ("TPC.TriageCompute.sm__..."): they
    # are sampled time series, not the same measurement as the plain metric.
    metric = long["metric"]
    metrics = pd.DataFrame({
        "launch": launch, "section": None, "metric": metric.to_numpy(), "label": None,
        "unit": units.to_numpy(), "value": values.to_numpy(), "text": long["text"].to_numpy(),
    })
    metrics = metrics.sort_values("launch", kind="stable")
    return _finish(launches, metrics, pd.DataFrame(columns=RULE_COLUMNS), path)


def _summary(frame: pd.DataFrame, path: Path) -> Report:
    """Per-kernel summary: one launch row per kernel name and shape, with invocations."""
    frame = frame[_valid_rows(frame, "Process ID")]
    key_cols = ["Process ID", "Kernel Name", "Block Size", "Grid Size", "Device", "CC"]
    launches, first = _launch_table(frame, key_cols, path)
    launches["id"] = pd.array([pd.NA] * len(launches), dtype="Int64")  # summaries have no IDs
    launches["invocations"] = pd.to_numeric(first["Invocations"], errors="coerce").to_numpy()
    launch_of = _key_index(frame, first, key_cols)
    avg, units = to_base_units(parse_numbers(frame["Average"]), frame["Metric Unit"])
    lo, _ = to_base_units(parse_numbers(frame["Minimum"]), frame["Metric Unit"])
    hi, _ = to_base_units(parse_numbers(frame["Maximum"]), frame["Metric Unit"])
    metric_text = frame["Metric Name"].astype(str)
    split = metric_text.str.extract(_LABEL_NAME)
    is_name = metric_text.str.fullmatch(METRIC_NAME)
    metrics = pd.DataFrame({
        "launch": launch_of, "section": frame["Section Name"].to_numpy(), "body_item": "",
        "metric": split[1].where(split[1].notna(), metric_text.where(is_name)).to_numpy(
            dtype=object),
        "label": split[0].where(split[0].notna(), metric_text.where(~is_name)).to_numpy(
            dtype=object),
        "unit": units.to_numpy(), "value": avg.to_numpy(), "text": frame["Average"].to_numpy(),
        "minimum": lo.to_numpy(), "maximum": hi.to_numpy(),
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
