"""The JSON contract (``docs/json-contract.md``, schema_version 1) of one analysis.

Every renderer reads this document: text and HTML format it, ``-f json`` writes it (streamed,
kernel by kernel, by :func:`write_json`). Fields are added, never renamed.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .. import json_text
from .._version import __version__
from ..derive.quantities import label_of, unit_of
from ..json_text import json_number, strict
from ..rules_engine.engine import Finding, NotEvaluated
from .ranking import rank_key

if TYPE_CHECKING:
    from .result import Analysis


def _int(value) -> int | None:
    v = json_number(value)
    return None if v is None else int(round(v))


_NO_ORIGIN = {"origin": None, "origin_label": None, "role": None, "op": None}


def _skipped_dict(n: NotEvaluated) -> dict:
    return {"rule": n.rule, "category": n.category, "missing": n.missing,
            "collect_with": n.collect_with}


def _most_severe_first(found: list[Finding]) -> list[Finding]:
    return sorted(found, key=lambda f: rank_key(f.severity, f.confidence,
                                                f.estimated_saving_ns))


def _finding_fields(f: Finding) -> dict:
    """A finding's JSON entry for orjson, which writes its Evidence, tuples and NaN itself."""
    return {name: getattr(f, name) for name in Finding.FIELDS}


def _finding_dict(f: Finding) -> dict:
    """The same entry for a renderer: plain dicts and lists, NaN as None (strict copies)."""
    return strict(_finding_fields(f))


class _NcuRulesByLaunch:
    """Ncu's rule results as JSON records of one launch, made when that launch is written.

    The records of every launch made at once were ~400 bytes each: 650,000 of them (260 MB)
    at 1 GB of text output, held while the JSON was written kernel by kernel. Each column is
    held as codes into its distinct values: a Python string per row and text column was
    28.6 MB for the 98,032 rule results of 150 MB of text output (7.2 MB now).
    """

    _COLS = ["rule", "section", "type", "title", "description", "speedup_type", "speedup"]

    def __init__(self, frame: pd.DataFrame | None) -> None:
        self._rows: dict[int, np.ndarray] = {}
        # Per column: (codes, values): values[codes[row]], missing as None; codes None for
        # a float column (its values, NaN for missing: strict() writes None).
        self._columns: list[tuple[np.ndarray | None, np.ndarray | list]] = []
        if frame is None or frame.empty:
            return
        for c in self._COLS:
            column = frame[c]
            if pd.api.types.is_float_dtype(column.dtype):  # never factorized: -0.0 stays
                self._columns.append((None, column.to_numpy(dtype="float64")))
            else:
                codes, distinct = pd.factorize(column)
                self._columns.append((codes, [*pd.Series(distinct, dtype=object), None]))
        launch = frame["launch"].to_numpy(dtype=np.int64)
        order = np.argsort(launch, kind="stable")  # rows of a launch in table order
        keys, starts = np.unique(launch[order], return_index=True)
        for key, rows in zip(keys.tolist(), np.split(order, starts[1:]), strict=True):
            self._rows[key] = rows

    def get(self, launch: int, default: list) -> list[dict]:
        """The records of one launch (``default`` when it has none)."""
        rows = self._rows.get(launch)
        if rows is None:
            return default
        columns = [values[rows].tolist() if codes is None
                   else [values[code] for code in codes[rows].tolist()]
                   for codes, values in self._columns]
        return [strict(dict(zip(self._COLS, record, strict=True)))
                for record in zip(*columns, strict=True)]


def _metric_list(frame: pd.DataFrame | None) -> list[dict]:
    if frame is None:
        return []
    cols = ["section", "metric", "label", "unit", "value", "text"]
    frame = frame.drop_duplicates(subset=["metric", "label", "section"])
    # Column by column, then zipped: thousands of metrics per launch under --set full, where
    # a record-wise to_dict and a strict() walk per record took 0.2 s for 9 launches.
    columns = [_plain_values(frame[c]) for c in cols]
    return [dict(zip(cols, row, strict=True)) for row in zip(*columns, strict=True)]


def _plain_values(column: pd.Series) -> list:
    """A column as JSON-safe Python values: missing, NaN and infinity as None."""
    if pd.api.types.is_float_dtype(column.dtype):
        return [v if math.isfinite(v) else None for v in column.to_numpy(dtype=float).tolist()]
    return [strict(v) for v in column.astype(object).where(column.notna(), None).tolist()]


SCHEMA_VERSION = 1


# Quantities shown for every kernel (JSON "quantities", the HTML kernel table, text output).
KEY_QUANTITIES = (
    "duration_ns", "sm_pct", "mem_pct", "dram_pct", "l1_pct", "l2_pct", "dram_bytes",
    "dram_bandwidth", "arith_intensity_dram", "flops_fp32", "flops_fp64", "flops_fp16",
    "theoretical_occupancy_pct", "achieved_occupancy_pct", "registers_per_thread",
    "shared_mem_per_block", "waves_per_sm", "issue_active", "global_ld_bytes_per_sector",
    "global_st_bytes_per_sector", "threads_per_inst", "branch_uniform_pct", "local_ld_insts",
    "local_st_insts", "shared_conflict_pct", "l1_hit_pct", "l2_hit_pct", "xu_pipe_pct",
    "tensor_pipe_pct",
)


def document_head(analysis: Analysis) -> dict:
    """The JSON contract's fields before ``kernels`` (in order)."""
    rep = analysis.report
    total = analysis.total_time_ns
    launches = rep.launches
    weight = (launches["duration_ns"].fillna(0.0) * launches["invocations"]).to_numpy()
    order = np.argsort(-weight, kind="stable")[:10]
    top = []
    for i in order:
        row = launches.iloc[int(i)]
        share = analysis.quantities.at[row["launch"], "time_share_pct"] / 100.0
        top.append({
            "id": _int(row["id"]), "launch": int(row["launch"]),
            "short_name": row["short_name"], "name": row["name"],
            "duration_ns": json_number(row["duration_ns"]), "time_share": json_number(share),
            "invocations": int(row["invocations"]),
            "bound": analysis.rooflines.bound[int(row["launch"])]})
    session = {k: v for k, v in rep.session.items() if k != "ncu_messages"}
    session.update(analysis.extra_session)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ncu-advise", "version": __version__},
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "sources": list(rep.sources),
        "command": analysis.command,
        "session": strict(session),
        "warnings": list(rep.warnings),
        "summary": {
            "launch_count": int(rep.launches["invocations"].sum()),
            "kernel_count": int(rep.launches["short_name"].nunique()),
            "total_duration_ns": json_number(total),
            "bounds": analysis.bounds(),
            "top_kernels": top,
            "application_not_evaluated": [
                _skipped_dict(n) for n in analysis.not_evaluated.by_launch()(None)],
        },
        # The changes to make, ranked, each saving counted once (actions.py); first because
        # outputs lead with them.
        "actions": [strict(a.to_dict(total)) for a in analysis.actions],
        "regions": [strict(r.to_dict()) for r in analysis.regions],
        "validity": analysis.validity,
    }


def _narrowed(fields: tuple[str, ...] | None) -> dict[str, tuple[str, ...]]:
    """The ``name.key`` fields: for each entry field, the keys of it wanted."""
    keys: dict[str, list[str]] = {}
    for name in fields or ():
        field, _, key = name.partition(".")
        if key:
            keys.setdefault(field, []).append(key)
    return {field: tuple(names) for field, names in keys.items()}


def iter_kernels(analysis: Analysis, include_metrics: bool = False,
                 fields: tuple[str, ...] | None = None, clean: bool = True,
                 launches: Collection[int] | None = None):
    """Yield the JSON entry of each launch in order, one at a time (only ``fields``).

    ``fields``: entry fields, or ``field.key`` for some keys of a field (of each item of a
    list field): ``roofline.bound``, ``findings.severity``. ``clean=False`` leaves findings
    as the JSON writer takes them (an Evidence mapping, tuples, NaN), not copied into plain
    dicts and lists for a renderer. ``launches``: only the entries of these launches.
    """
    finding_entry = _finding_dict if clean else _finding_fields
    rep = analysis.report
    wanted = (lambda name: True) if fields is None else frozenset(fields).__contains__
    keys = _narrowed(fields)
    roofline_keys, finding_keys = keys.get("roofline", ()), keys.get("findings", ())
    rules_by_launch = _NcuRulesByLaunch(rep.ncu_rules)
    metrics_by_launch = ({int(k): g for k, g in rep.metrics.groupby("launch")}
                         if include_metrics else {})
    # One pass over findings and not-evaluated entries (a scan per launch was quadratic).
    findings_by_launch: dict[int, list[Finding]] = {}
    for f in analysis.findings:
        findings_by_launch.setdefault(f.launch, []).append(f)
    # The entries themselves, made when their launch is written: ~11 a launch of a text
    # capture, 730,000 dicts (~300 MB) at 1 GB of text if all were made first.
    skipped_of = analysis.not_evaluated.by_launch()
    # The key quantities of each launch as plain floats, with their unit and label.
    shown = [name for name in KEY_QUANTITIES if name in analysis.quantities.columns]
    described = [(name, unit_of(name), label_of(name)) for name in shown]
    values = analysis.quantities[shown].to_numpy(dtype="float64")  # a row's list when written
    shares = analysis.quantities["time_share_pct"].to_numpy(dtype="float64").tolist()
    position = {int(k): i for i, k in enumerate(analysis.quantities.index.tolist())}
    origins = analysis.origins_by_launch()
    bounds = analysis.rooflines.bound
    # "roofline.bound" asks for the roofline entry with its bound only.
    entry_fields = None if fields is None else list(dict.fromkeys(
        name.split(".")[0] for name in fields))
    table = rep.launches
    if launches is not None:
        table = table[table["launch"].isin(list(launches)).to_numpy()]
    for row in table.itertuples(index=False):
        launch = int(row.launch)
        qrow = values[position[launch]].tolist()
        entry = {
            "id": _int(row.id), "launch": launch, "source": row.source, "name": row.name,
            "short_name": row.short_name,
            "grid": [_int(row.grid_x), _int(row.grid_y), _int(row.grid_z)],
            "block": [_int(row.block_x), _int(row.block_y), _int(row.block_z)],
            "device": _int(row.device), "cc": None if pd.isna(row.cc) else str(row.cc),
            "stream": _int(row.stream), "nvtx": None if pd.isna(row.nvtx) else row.nvtx,
            "invocations": int(row.invocations), "duration_ns": json_number(row.duration_ns),
            "time_share": json_number(shares[position[launch]] / 100.0),
            "quantities": {
                name: {"value": value, "unit": unit, "label": label}
                for (name, unit, label), value in zip(described, qrow, strict=True)
                if math.isfinite(value)
            } if wanted("quantities") else None,
            "roofline": (analysis.rooflines[launch].to_dict() if wanted("roofline")
                         # the bound alone is kept for every launch; the rest is computed
                         else {"bound": bounds[launch]} if roofline_keys == ("bound",)
                         else _keys_of(analysis.rooflines[launch].to_dict(), roofline_keys)
                         if roofline_keys else None),
            "occupancy": analysis.occupancy[launch],
            "launch_shape": analysis.launch_shapes.get(launch, {}),
            "limiter": (analysis.limiters[launch].to_dict()
                        if launch in analysis.limiters else None),
            "findings": [finding_entry(f) if not finding_keys else
                         strict({key: getattr(f, key) for key in finding_keys})
                         for f in _most_severe_first(findings_by_launch.get(launch, []))]
            if wanted("findings") or finding_keys else None,
            "not_evaluated": [_skipped_dict(n) for n in skipped_of(launch)],
            "ncu_rules": rules_by_launch.get(launch, []),
            **origins.get(launch, _NO_ORIGIN),
        }
        if include_metrics:
            entry["metrics"] = _metric_list(metrics_by_launch.get(launch))
        yield entry if entry_fields is None else {name: entry[name] for name in entry_fields}


def _keys_of(entry: dict, keys: tuple[str, ...]) -> dict:
    return {key: entry[key] for key in keys}


def to_dict(analysis: Analysis, include_metrics: bool = False,
            kernel_fields: tuple[str, ...] | None = None) -> dict:
    """Return the JSON contract (``docs/json-contract.md``), schema_version 1.

    ``kernel_fields``: the fields each ``kernels`` entry holds (None: all;
    ``roofline.bound``: a roofline with its bound only); the text
    output reads a few, and every launch's whole entry was ~15 KB at 50,000 launches.
    """
    document = document_head(analysis)
    document["kernels"] = list(iter_kernels(analysis, include_metrics, kernel_fields))
    document["findings"] = [strict(g) for g in analysis.ranked()]
    return document


def write_json(analysis: Analysis, fh, include_metrics: bool = False) -> None:
    """Write :func:`to_dict` as indented strict JSON to a binary file, kernel by kernel.

    The document is :func:`to_dict`'s, but only one kernel's entry is in memory at a
    time (a report of 50,000 launches makes ~600 MB of JSON).
    """
    dumps = json_text.dumps
    document = document_head(analysis)
    fh.write(b"{\n")
    for key, value in document.items():
        fh.write(b'  "' + key.encode() + b'": ' + dumps(value, 1) + b",\n")
    fh.write(b'  "kernels": [')
    for i, entry in enumerate(iter_kernels(analysis, include_metrics, clean=False)):
        fh.write((b",\n    " if i else b"\n    ") + dumps(entry, 2))
    fh.write(b"\n  ],\n" if len(analysis.report.launches) else b"],\n")
    fh.write(b'  "findings": ' + dumps(analysis.ranked(), 1)
             + b"\n}\n")


def matching_launches(kernels: list[dict], kernel: str | None = None,
                      nvtx: str | None = None) -> list[int]:
    """The launch numbers of ``kernels`` entries a ``--kernel``/``--nvtx`` filter keeps.

    Args:
        kernels: the document's ``kernels`` entries (``id``, ``launch``, ``source``,
            ``name``, ``short_name``, ``op``, ``nvtx``).
        kernel: a launch's ID (ncu's ID; with several input files, the launch number the
            text output's ``#`` column shows), or a regular expression searched in the
            kernel's name, short name and operation.
        nvtx: an NVTX range (``fwd`` or ``model/fwd``): launches inside it, at any depth.

    Raises:
        NcuAdviseError: the expression is not a valid regular expression.

    """
    from ..errors import NcuAdviseError

    several = len({k["source"] for k in kernels}) > 1
    keep = list(kernels)
    if kernel is not None:
        if kernel.strip().isdigit():
            number = int(kernel)
            keep = [k for k in keep if (k["launch"] if several else k["id"]) == number]
        else:
            try:
                pattern = re.compile(kernel)
            except re.error as exc:
                raise NcuAdviseError(f"--kernel {kernel!r}: not a launch ID nor a valid "
                                     f"regular expression ({exc})") from None
            keep = [k for k in keep if any(pattern.search(str(k.get(field) or ""))
                                           for field in ("name", "short_name", "op"))]
    if nvtx is not None:
        wanted = "/" + nvtx.strip("/") + "/"
        keep = [k for k in keep if k.get("nvtx") and wanted in "/" + k["nvtx"] + "/"]
    return [int(k["launch"]) for k in keep]


def select(document: dict, launches: list[int]) -> dict:
    """The document narrowed to some launches: their kernels, findings, actions and ranges.

    The summary, shares and savings stay those of the whole run (a filter changes what is
    shown, not what was measured).
    """
    kept = set(launches)
    kernels = [k for k in document["kernels"] if int(k["launch"]) in kept]
    ids = {k["id"] for k in kernels}
    narrowed = dict(document)
    narrowed["kernels"] = kernels
    narrowed["findings"] = [f for f in document["findings"]
                            if kept & set(f.get("launch_ids") or [])]
    narrowed["actions"] = [a for a in document.get("actions", [])
                           if ids & set(a.get("launches") or [])]
    narrowed["regions"] = [r for r in document.get("regions", [])
                           if kept & set(r.get("launch_ids") or [])]
    return narrowed


@dataclass
class ShapeGroup:
    """The document's launches of one kernel name, grid and block, summed.

    Attributes:
        first: index (in ``kernels``) of the group's longest launch, which stands for it.
        members: indexes of all its launches.
        launches: launches it counts (invocations summed).
        time_ns: its GPU time (duration x invocations, summed).
        time_share: its share of the run (None when no member has one).

    """

    first: int
    members: list[int]
    launches: int
    time_ns: float
    time_share: float | None


def shape_groups(kernels: list[dict]) -> list[ShapeGroup]:
    """Group the ``kernels`` entries by name, grid and block; largest summed time first.

    A loop's repeated launches of one kernel shape read as one row in the text table and the
    HTML page of a big run.
    """
    def time(k: dict) -> float:
        return (k["duration_ns"] or 0.0) * (k["invocations"] or 1)

    by_key: dict[tuple, list[int]] = {}
    for i, k in enumerate(kernels):
        by_key.setdefault((k["name"], str(k.get("grid")), str(k.get("block"))), []).append(i)
    groups = []
    for members in by_key.values():
        shares = [kernels[i]["time_share"] for i in members
                  if kernels[i]["time_share"] is not None]
        groups.append(ShapeGroup(
            first=max(members, key=lambda i: time(kernels[i])), members=members,
            launches=sum(int(kernels[i]["invocations"] or 1) for i in members),
            time_ns=sum(time(kernels[i]) for i in members),
            time_share=sum(shares) if shares else None))
    return sorted(groups, key=lambda g: -g.time_ns)
