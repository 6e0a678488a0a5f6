"""The pipeline: Report -> quantities -> roofline, occupancy -> rules -> findings.

``analyze(report)`` computes the one result (:class:`~.result.Analysis`) every renderer formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..derive.host_timeline import host_timeline
from ..derive.limiter import limiters
from ..derive.ncu_evidence import ncu_rule_categories, ncu_rule_quantities
from ..derive.occupancy_report import launch_occupancy
from ..derive.origin import op_label, origin_table
from ..derive.quantities import compute_with_provenance
from ..derive.roofline import Rooflines
from ..derive.source_lines import attribute
from ..report import Report
from ..rules_engine.engine import NotEvaluated, NotEvaluatedList, Provenance, evaluate
from ..rules_engine.loader import load_rules
from ..rules_engine.policy import apply_policy
from ..rules_engine.schema import Rule
from .regions import summarize_regions
from .result import Analysis


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


def _point_to_raw_export(skipped: NotEvaluatedList, report: Report) -> NotEvaluatedList:
    """Say where a metric missing from a details-page (or text) export is.

    It was usually collected but not printed: export the raw page first; collect it only if
    the capture lacked it (:meth:`Report.body_only_launches` decides which launches).
    """
    body_only = report.body_only_launches()
    launches = skipped.launches()  # -1: an entry about the application
    on_launch = body_only.reindex(launches, fill_value=False).to_numpy(dtype=bool)
    rows = np.where(launches < 0, bool(body_only.all()), on_launch)

    def hinted(n: NotEvaluated) -> NotEvaluated:
        if not n.collect_with.startswith(RAW_EXPORT_HINT):
            n.collect_with = f"{RAW_EXPORT_HINT}; if not collected: {n.collect_with}"
        return n

    skipped.relabel(rows, hinted)
    return skipped


def with_origin(launches: pd.DataFrame, origins: str | None = None,
                sourced: frozenset[str] = frozenset()) -> pd.DataFrame:
    """The launch table with each kernel's origin (user or library) and role added.

    ``sourced``: names of the kernels the report has source lines for (built with
    ``-lineinfo``), which makes an unrecognized namespaced kernel the user's.
    """
    table = origin_table(origins)
    found = {name: table.classify(str(name), name in sourced)
             for name in launches["name"].unique()}
    roles = {name: table.role(str(name)) for name in launches["name"].unique()}
    ops = {(name, short): op_label(str(name), str(short)) for name, short in
           launches[["name", "short_name"]].drop_duplicates().itertuples(index=False)}
    return launches.assign(
        origin=launches["name"].map(lambda n: found[n].id),
        origin_label=launches["name"].map(lambda n: found[n].label),
        origin_library=launches["name"].map(lambda n: found[n].library),
        origin_eager=launches["name"].map(lambda n: found[n].eager),
        op=[ops[key] for key in zip(launches["name"], launches["short_name"], strict=True)],
        role=launches["name"].map(roles))


def analyze(report: Report, rules: list[Rule] | None = None,
            rules_dirs: list[Path] | None = None, measured_bandwidth: float | None = None,
            command: list[str] | None = None, origins: str | None = None,
            session: Mapping | None = None) -> Analysis:
    """Analyze a Report: derive quantities, place every launch on the roofline, run the rules.

    Args:
        report: what :func:`ncu_advisor.read_report` returned.
        rules: rules to run (default: the built-in ones plus ``rules_dirs``).
        rules_dirs: extra folders of rule files (``--rules DIR``).
        measured_bandwidth: a measured DRAM roof in byte/s, shown beside the datasheet one.
        command: the profiled command line, when the analysis comes from ``ncu-advise ./app``.
        origins: a file of extra kernel origins (format of ``data/origins.toml``).
        session: facts of the profiling run the report does not hold (ncu's version and set,
            passes, the program's exit code), merged into the JSON ``session``.

    """
    if rules is None:
        rules = load_rules(rules_dirs)
    wide = _with_launch_shape(report)
    stated = ncu_rule_quantities(report.ncu_rules, wide.index, report.metrics)
    sourced = frozenset(report.launches.loc[
        report.launches["launch"].isin(report.source_lines["launch"].unique()), "name"])
    launches = with_origin(report.launches, origins, sourced)
    quantities, from_rule = compute_with_provenance(
        wide, stated, invocations=launches.set_index("launch")["invocations"],
        other_time_ns=float(report.session.get("unprofiled_time_ns") or 0.0),
        origins=launches.set_index("launch")[["role", "origin_library", "cc", "name"]])
    opt = ncu_rule_categories(report.ncu_rules)
    provenance = Provenance(from_rule, {int(k): set(g["category"]) for k, g in
                                        opt.groupby("launch")} if len(opt) else {})
    rooflines = Rooflines(wide, quantities, report.session.get("gpu"), measured_bandwidth)
    occupancy, shapes = launch_occupancy(report, quantities)
    findings, skipped = evaluate(rules, quantities, launches, provenance)
    skipped = _point_to_raw_export(skipped, report)
    findings = apply_policy(findings, launches, origin_table(origins),
                            quantities["time_share_pct"])
    attribute(findings, report.source_lines)
    regions = summarize_regions(launches, rooflines.bound, findings)
    timeline = host_timeline(launches)
    return Analysis(report=report, quantities=quantities, rooflines=rooflines,
                    occupancy=occupancy, findings=findings, not_evaluated=skipped, rules=rules,
                    command=command, extra_session=dict(session or {}),
                    limiters=limiters(quantities),
                    launch_shapes=shapes, regions=regions,
                    host_waits=({} if timeline is None
                                else timeline.wait_ns.dropna().astype(float).to_dict()),
                    origins=launches.set_index("launch")[["origin", "origin_label",
                                                          "origin_library", "role", "op"]])
