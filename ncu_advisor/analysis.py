"""The analysis: Report -> quantities -> roofline, occupancy -> rules -> ranked findings.

``analyze(report)`` is the one computed result every renderer (text, JSON, HTML) formats.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__, json_text
from .derive.ncu_evidence import ncu_rule_categories, ncu_rule_quantities
from .derive.occupancy_report import LaunchEntries, launch_occupancy
from .derive.origin import origin_table
from .derive.quantities import compute_with_provenance, label_of, unit_of
from .derive.roofline import Rooflines
from .derive.source_lines import attribute
from .json_text import strict
from .regions import Region, summarize_regions
from .report import Report
from .rules_engine.engine import SEVERITY_RANK, Finding, NotEvaluated, Provenance, evaluate
from .rules_engine.findings import rank_groups, rank_key
from .rules_engine.loader import load_rules
from .rules_engine.policy import apply_policy
from .rules_engine.schema import Rule
from .validity import validity_checks

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


def _num(value) -> float | None:
    """A JSON-safe float (None for NaN/inf/missing)."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _int(value) -> int | None:
    v = _num(value)
    return None if v is None else int(round(v))


@dataclass
class Analysis:
    """Everything computed from one Report."""

    report: Report
    quantities: pd.DataFrame
    rooflines: Rooflines  # launch -> Roofline, computed when read; .bound kept for all
    occupancy: Mapping[int, dict]  # built per launch on access (derive/occupancy_report.py)
    findings: list[Finding]
    not_evaluated: list[NotEvaluated]
    rules: list[Rule]
    command: list[str] | None = None
    extra_session: dict = field(default_factory=dict)
    launch_shapes: Mapping[int, dict] = field(default_factory=dict)
    origins: pd.DataFrame | None = None  # per launch: origin, origin_label, role
    regions: list[Region] = field(default_factory=list)

    @property
    def validity(self) -> list[dict]:
        """What limits trust in the numbers (``validity.py``); reads ``extra_session`` too."""
        return validity_checks(self.report, self.rules, self.not_evaluated, self.extra_session)

    @property
    def total_time_ns(self) -> float:
        """Total GPU time of all launches (invocations counted)."""
        return self.report.total_duration_ns

    def kernel_findings(self, launch: int) -> list[Finding]:
        """Findings about one launch, most severe first."""
        return _most_severe_first([f for f in self.findings if f.launch == launch])

    def ranked(self) -> list[dict]:
        """Findings across the application, grouped by rule and kernel, most important first.

        Each kernel finding is weighted by what it saves in the whole run (its estimated
        saving in the kernel times the kernel's invocations); repeated launches of one kernel
        are grouped into one entry. Order: :func:`~.rules_engine.findings.rank_groups` (the
        saving weighted by confidence; a finding without an estimate beside its kernel's).
        """
        table = self.report.launches
        # Plain dicts: a .loc per finding was most of the cost on large reports.
        short_names = dict(zip(table["launch"], table["short_name"], strict=True))
        ncu_ids = dict(zip(table["launch"], table["id"], strict=True))
        invocations = dict(zip(table["launch"], table["invocations"], strict=True))
        total = self.total_time_ns or float("nan")
        groups: dict[tuple, dict] = {}
        for f in self.findings:
            if f.launch is None:
                key = (f.rule, tuple(f.kernel_ids))
                kernel = "application"
                ids = list(f.kernel_ids)
                weight = 1
            else:
                kernel = short_names[f.launch]
                key = (f.rule, kernel)
                ids = [int(ncu_ids[f.launch])] if not pd.isna(ncu_ids[f.launch]) else []
                weight = int(invocations[f.launch])
            g = groups.get(key)
            saving = (f.estimated_saving_ns or 0.0) * weight
            if g is None:
                groups[key] = g = {
                    "rule": f.rule, "category": f.category, "severity": f.severity,
                    "confidence": f.confidence, "title": f.title, "kernel": kernel,
                    "kernel_ids": [], "launch_ids": [], "launches": 0, "estimated_saving_ns": 0.0,
                    "has_estimate": False, "advice": f.advice, "demo": f.demo,
                    "evidence": f.evidence, "evidence_source": f.evidence_source,
                    "origin": f.origin, "note": f.note,
                    "source_lines": f.source_lines,
                    "source_cause": f.source_cause, "collect_with": f.collect_with,
                }
            g["kernel_ids"].extend(ids)
            g["launch_ids"].extend([f.launch] if f.launch is not None else f.launch_ids)
            g["launches"] += weight if f.launch is not None else len(ids)
            g["estimated_saving_ns"] += saving
            g["has_estimate"] |= f.estimated_saving_ns is not None
            if SEVERITY_RANK[f.severity] < SEVERITY_RANK[g["severity"]]:
                g["severity"], g["title"], g["evidence"] = f.severity, f.title, f.evidence
        out = []
        for g in groups.values():
            if not g.pop("has_estimate"):
                g["estimated_saving_ns"] = None
            saving = g["estimated_saving_ns"]
            g["app_saving_pct"] = _num(100.0 * saving / total) if saving is not None else None
            out.append(g)
        return rank_groups(out)

    def _origins_by_launch(self) -> Mapping[int, dict]:
        """Each kernel's origin fields for the JSON (``origin``, ``origin_label``, ``role``)."""
        if self.origins is None:
            return {}
        table = self.origins
        return LaunchEntries(table.index, {
            "origin": table["origin"].tolist(), "origin_label": table["origin_label"].tolist(),
            "role": [None if pd.isna(role) else role for role in table["role"].tolist()]})

    def bounds(self) -> dict[str, int]:
        """How many launches are memory-, compute-, latency-bound or unknown."""
        counts = {"memory": 0, "compute": 0, "latency": 0, "unknown": 0}
        for bound in self.rooflines.bound.values():
            counts[bound or "unknown"] += 1
        return counts

    def to_dict(self, include_metrics: bool = False,
                kernel_fields: tuple[str, ...] | None = None) -> dict:
        """Return the JSON contract (``docs/json-contract.md``), schema_version 1.

        ``kernel_fields``: the fields each ``kernels`` entry holds (None: all;
        ``roofline.bound``: a roofline with its bound only); the text
        output reads a few, and every launch's whole entry was ~15 KB at 50,000 launches.
        """
        document = self._document()
        document["kernels"] = list(self.iter_kernels(include_metrics, kernel_fields))
        document["findings"] = [strict(g) for g in self.ranked()]
        return document

    def write_json(self, fh, include_metrics: bool = False) -> None:
        """Write :meth:`to_dict` as indented strict JSON to a binary file, kernel by kernel.

        The document is :meth:`to_dict`'s, but only one kernel's entry is in memory at a
        time (a report of 50,000 launches makes ~600 MB of JSON).
        """
        dumps = json_text.dumps
        document = self._document()
        fh.write(b"{\n")
        for key, value in document.items():
            fh.write(b'  "' + key.encode() + b'": ' + dumps(value, 1) + b",\n")
        fh.write(b'  "kernels": [')
        for i, entry in enumerate(self.iter_kernels(include_metrics, clean=False)):
            fh.write((b",\n    " if i else b"\n    ") + dumps(entry, 2))
        fh.write(b"\n  ],\n" if len(self.report.launches) else b"],\n")
        fh.write(b'  "findings": ' + dumps(self.ranked(), 1)
                 + b"\n}\n")

    def _document(self) -> dict:
        """The JSON contract's fields before ``kernels`` (in order)."""
        rep = self.report
        total = self.total_time_ns
        launches = rep.launches
        weight = (launches["duration_ns"].fillna(0.0) * launches["invocations"]).to_numpy()
        order = np.argsort(-weight, kind="stable")[:10]
        top = []
        for i in order:
            row = launches.iloc[int(i)]
            share = self.quantities.at[row["launch"], "time_share_pct"] / 100.0
            top.append({
                "id": _int(row["id"]), "launch": int(row["launch"]),
                "short_name": row["short_name"], "name": row["name"],
                "duration_ns": _num(row["duration_ns"]), "time_share": _num(share),
                "invocations": int(row["invocations"]),
                "bound": self.rooflines.bound[int(row["launch"])]})
        session = {k: v for k, v in rep.session.items() if k != "ncu_messages"}
        session.update(self.extra_session)
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "ncu-advise", "version": __version__},
            "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "sources": list(rep.sources),
            "command": self.command,
            "session": strict(session),
            "warnings": list(rep.warnings),
            "summary": {
                "launch_count": int(rep.launches["invocations"].sum()),
                "kernel_count": int(rep.launches["short_name"].nunique()),
                "total_duration_ns": _num(total),
                "bounds": self.bounds(),
                "top_kernels": top,
                "application_not_evaluated": [
                    _skipped_dict(n) for n in self.not_evaluated if n.launch is None],
            },
            "regions": [strict(r.to_dict()) for r in self.regions],
            "validity": self.validity,
        }

    def iter_kernels(self, include_metrics: bool = False,
                     fields: tuple[str, ...] | None = None, clean: bool = True):
        """Yield the JSON entry of each launch in order, one at a time (only ``fields``).

        ``clean=False`` leaves findings as the JSON writer takes them (an Evidence mapping,
        tuples, NaN), not copied into plain dicts and lists for a renderer.
        """
        finding_entry = _finding_dict if clean else _finding_fields
        rep = self.report
        wanted = (lambda name: True) if fields is None else frozenset(fields).__contains__
        rules_by_launch = _ncu_rules_by_launch(rep.ncu_rules)
        metrics_by_launch = ({int(k): g for k, g in rep.metrics.groupby("launch")}
                             if include_metrics else {})
        # One pass over findings and not-evaluated entries (a scan per launch was quadratic).
        findings_by_launch: dict[int, list[Finding]] = {}
        for f in self.findings:
            findings_by_launch.setdefault(f.launch, []).append(f)
        skipped_by_launch: dict[int | None, list[dict]] = {}
        for n in self.not_evaluated:
            skipped_by_launch.setdefault(n.launch, []).append(_skipped_dict(n))
        # The key quantities of each launch as plain floats, with their unit and label.
        shown = [name for name in KEY_QUANTITIES if name in self.quantities.columns]
        described = [(name, unit_of(name), label_of(name)) for name in shown]
        values = self.quantities[shown].to_numpy(dtype="float64")  # a row's list when written
        shares = self.quantities["time_share_pct"].to_numpy(dtype="float64").tolist()
        position = {int(k): i for i, k in enumerate(self.quantities.index.tolist())}
        origins = self._origins_by_launch()
        bounds = self.rooflines.bound
        # "roofline.bound" asks for the roofline entry with its bound only.
        entry_fields = None if fields is None else list(dict.fromkeys(
            name.split(".")[0] for name in fields))
        for row in rep.launches.itertuples(index=False):
            launch = int(row.launch)
            qrow = values[position[launch]].tolist()
            entry = {
                "id": _int(row.id), "launch": launch, "source": row.source, "name": row.name,
                "short_name": row.short_name,
                "grid": [_int(row.grid_x), _int(row.grid_y), _int(row.grid_z)],
                "block": [_int(row.block_x), _int(row.block_y), _int(row.block_z)],
                "device": _int(row.device), "cc": None if pd.isna(row.cc) else str(row.cc),
                "stream": _int(row.stream), "nvtx": None if pd.isna(row.nvtx) else row.nvtx,
                "invocations": int(row.invocations), "duration_ns": _num(row.duration_ns),
                "time_share": _num(shares[position[launch]] / 100.0),
                "quantities": {
                    name: {"value": value, "unit": unit, "label": label}
                    for (name, unit, label), value in zip(described, qrow, strict=True)
                    if math.isfinite(value)
                } if wanted("quantities") else None,
                "roofline": (self.rooflines[launch].to_dict() if wanted("roofline")
                             else {"bound": bounds[launch]} if wanted("roofline.bound")
                             else None),
                "occupancy": self.occupancy[launch],
                "launch_shape": self.launch_shapes.get(launch, {}),
                "findings": [finding_entry(f) for f in
                             _most_severe_first(findings_by_launch.get(launch, []))]
                if wanted("findings") else None,
                "not_evaluated": skipped_by_launch.get(launch, []),
                "ncu_rules": rules_by_launch.get(launch, []),
                **origins.get(launch, _NO_ORIGIN),
            }
            if include_metrics:
                entry["metrics"] = _metric_list(metrics_by_launch.get(launch))
            yield entry if entry_fields is None else {name: entry[name] for name in entry_fields}


_NO_ORIGIN = {"origin": None, "origin_label": None, "role": None}


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


def _ncu_rules_by_launch(frame: pd.DataFrame) -> dict[int, list[dict]]:
    """Ncu's rule results as JSON records, grouped by launch (one pass over the table)."""
    cols = ["rule", "section", "type", "title", "description", "speedup_type", "speedup"]
    out: dict[int, list[dict]] = {}
    if frame is None or frame.empty:
        return out
    table = frame[["launch", *cols]].astype(object).where(frame[["launch", *cols]].notna(), None)
    for row in table.itertuples(index=False):
        record = {c: getattr(row, c) for c in cols}
        out.setdefault(int(row.launch), []).append(strict(record))
    return out


def _metric_list(frame: pd.DataFrame | None) -> list[dict]:
    if frame is None:
        return []
    cols = ["section", "metric", "label", "unit", "value", "text"]
    frame = frame.drop_duplicates(subset=["metric", "label", "section"])
    records = frame[cols].astype(object).where(frame[cols].notna(), None).to_dict("records")
    return [strict(r) for r in records]


def _with_launch_shape(report: Report) -> pd.DataFrame:
    """The wide metric view, with grid and block sizes filled from the launch table.

    Every CSV export names the launch shape, even a ``--metrics`` run without LaunchStats.
    """
    wide = report.wide()
    launches = report.launches.set_index("launch")
    shape = {
        "launch__grid_size": launches[["grid_x", "grid_y", "grid_z"]].astype("float64").prod(
            axis=1, min_count=3),
        "launch__block_size": launches[["block_x", "block_y", "block_z"]].astype(
            "float64").prod(axis=1, min_count=3),
    }
    missing = {k: v for k, v in shape.items()
               if k not in wide.columns or wide[k].isna().any()}
    if not missing:
        return wide
    wide = wide.copy()
    for metric, values in missing.items():
        current = wide[metric] if metric in wide.columns else pd.Series(np.nan, index=wide.index)
        wide[metric] = current.fillna(values.reindex(wide.index))
    return wide


RAW_EXPORT_HINT = ("the raw page of the same capture (ncu --import FILE.ncu-rep --csv --page raw) "
                   "or the .ncu-rep itself")


def _point_to_raw_export(skipped: list[NotEvaluated], report: Report) -> list[NotEvaluated]:
    """Say where a metric missing from a details-page (or text) export is.

    It was usually collected but not printed: export the raw page first; collect it only if
    the capture lacked it (:meth:`Report.body_only_launches` decides which launches).
    """
    body_only = report.body_only_launches().to_dict()
    all_body_only = all(body_only.values())
    for n in skipped:
        if (body_only.get(n.launch, False) if n.launch is not None else all_body_only) \
                and not n.collect_with.startswith(RAW_EXPORT_HINT):
            n.collect_with = f"{RAW_EXPORT_HINT}; if not collected: {n.collect_with}"
    return skipped


def with_origin(launches: pd.DataFrame, origins: str | None = None) -> pd.DataFrame:
    """The launch table with each kernel's origin (user or library) and role added."""
    table = origin_table(origins)
    found = {name: table.classify(str(name)) for name in launches["name"].unique()}
    roles = {name: table.role(str(name)) for name in launches["name"].unique()}
    return launches.assign(
        origin=launches["name"].map(lambda n: found[n].id),
        origin_label=launches["name"].map(lambda n: found[n].label),
        origin_library=launches["name"].map(lambda n: found[n].library),
        role=launches["name"].map(roles))


def analyze(report: Report, rules: list[Rule] | None = None,
            rules_dirs: list[Path] | None = None, measured_bandwidth: float | None = None,
            command: list[str] | None = None, origins: str | None = None) -> Analysis:
    """Analyze a Report: derive quantities, place every launch on the roofline, run the rules.

    Args:
        report: what :func:`ncu_advisor.read_report` returned.
        rules: rules to run (default: the built-in ones plus ``rules_dirs``).
        rules_dirs: extra folders of rule files (``--rules DIR``).
        measured_bandwidth: a measured DRAM roof in byte/s, shown beside the datasheet one.
        command: the profiled command line, when the analysis comes from ``ncu-advise ./app``.
        origins: a file of extra kernel origins (format of ``data/origins.toml``).

    """
    if rules is None:
        rules = load_rules(rules_dirs)
    wide = _with_launch_shape(report)
    stated = ncu_rule_quantities(report.ncu_rules, wide.index, report.metrics)
    launches = with_origin(report.launches, origins)
    quantities, from_rule = compute_with_provenance(
        wide, stated, invocations=launches.set_index("launch")["invocations"])
    opt = ncu_rule_categories(report.ncu_rules)
    provenance = Provenance(from_rule, {int(k): set(g["category"]) for k, g in
                                        opt.groupby("launch")} if len(opt) else {})
    rooflines = Rooflines(wide, quantities, report.session.get("gpu"), measured_bandwidth)
    occupancy, shapes = launch_occupancy(report, quantities)
    findings, skipped = evaluate(rules, quantities, launches, provenance)
    skipped = _point_to_raw_export(skipped, report)
    findings = apply_policy(findings, launches, origin_table(origins))
    attribute(findings, report.source_lines)
    regions = summarize_regions(launches, rooflines.bound, findings)
    return Analysis(report=report, quantities=quantities, rooflines=rooflines,
                    occupancy=occupancy, findings=findings, not_evaluated=skipped, rules=rules,
                    command=command, launch_shapes=shapes, regions=regions,
                    origins=launches.set_index("launch")[["origin", "origin_label", "role"]])

