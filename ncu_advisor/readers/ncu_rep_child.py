"""Child process that reads a ``.ncu-rep`` through NVIDIA's ``ncu_report`` (native code).

Run as a script (``python ncu_rep_child.py REPORT``) so that it imports neither pandas nor the
package: a damaged report can make the native reader abort the whole process (SIGABRT), and
that must end this child, not the user's command. The metric names to keep come as JSON on
stdin (``null``: all); results go to stdout as a stream of pickled records, one per launch,
so neither side holds the whole report twice:

* ``("launch", facts, names, units, values, strings, rules)`` per kernel result;
* ``("counters", records)``: which kernel results have per-instruction counters;
* ``("done", count)`` at the end, or ``("error", message)``.

Given ``{"lines": [record, ...]}`` on stdin instead, it sends ``("lines", record, rows)``:
the source lines of those kernel results (the ones built with line information), then
``done``. The reader asks a new child for every :data:`LINES_PER_CHILD` launches.

Only the standard library is imported at the top; ``ncu_report`` is found by
:func:`import_ncu_report` (the PyPI wheel, ``NCU_REPORT_PATH`` or an Nsight Compute install).
"""

from __future__ import annotations

import glob
import importlib
import json
import math
import os
import pickle
import sys
from pathlib import Path

# Launch facts read from metrics (the same names ncu prints in the raw page).
FACT_METRICS = (
    "launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z", "launch__block_dim_x",
    "launch__block_dim_y", "launch__block_dim_z", "launch__device_id", "launch__context_id",
    "launch__stream_id", "gpu__time_duration.sum", "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor",
)


# Per-PC metrics of a .ncu-rep -> our column (the stall reasons are added by prefix).
REP_METRICS = {
    "inst_executed": "inst_executed",
    "thread_inst_executed": "thread_inst_executed",
    "smsp__pcsamp_sample_count": "samples",
    "memory_l2_theoretical_sectors_global": "l2_sectors_global",
    "memory_l2_theoretical_sectors_global_ideal": "l2_sectors_global_ideal",
    "derived__memory_l2_theoretical_sectors_global_excessive": "l2_sectors_global_excessive",
    "derived__memory_l1_conflicts_shared_nway": "shared_nway",
}
_REP_STALL = "smsp__pcsamp_warps_issue_stalled_"
# Enumerations of the per-PC memory_type / memory_access_type metrics, read off the same
# instructions in a source page export of the same report (H200, ncu 2025.3.1).
_MEMORY_TYPE = {4: "Global", 8: "Local", 16: "Shared"}
_ACCESS_TYPE = {2: "Load", 4: "Store"}
# Launches whose source lines one child reads: the native reader keeps every launch's SASS and
# line tables it has touched until the process ends, closing the report frees nothing (~20 MB
# a PyTorch launch of --set full on the H200: 2.1 GB for 96 launches in one process).
LINES_PER_CHILD = 16


def ncu_report_folders() -> list[str]:
    """Folders holding an Nsight Compute install's ``ncu_report.py``, preferred first.

    ``NCU_REPORT_PATH``, then the usual install places.
    """
    candidates = [os.environ.get("NCU_REPORT_PATH", "")]
    candidates += sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)
    candidates += sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python"), reverse=True)
    return [c for c in dict.fromkeys(filter(None, candidates)) if Path(c, "ncu_report.py").exists()]


def import_ncu_report():
    """Import ``ncu_report`` from the wheel or an Nsight Compute install (None if absent)."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    for folder in ncu_report_folders():
        sys.path.insert(0, folder)
        try:
            return importlib.import_module("ncu_report")
        except ImportError:
            sys.path.remove(folder)
    return None


def _nvtx_of(action) -> str | None:
    """Return the push/pop NVTX ranges open at launch, outer/inner."""
    try:
        state = action.nvtx_state()
        if state is None:
            return None
        names = []
        for domain_id in state.domains():
            domain = state.domain_by_id(domain_id)
            names.extend(str(r) for r in domain.push_pop_ranges())
        return "/".join(names) or None
    except Exception:  # noqa: BLE001 - NVTX is optional decoration; never fail a read on it
        return None


def _float(value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def _rules(action) -> list[tuple]:
    rows = []
    for result in action.rule_results_as_dicts():
        message = result.get("rule_message") or {}
        speedup = result.get("speedup_estimation") or {}
        rows.append((result.get("section_identifier"), result.get("rule_identifier"),
                     message.get("type", 0), message.get("title"), message.get("message"),
                     speedup.get("type", 0), _float(speedup.get("speedup", math.nan))))
    return rows


def source_lines_of_action(action, launch: int) -> list[dict]:
    """Rows of ``source_page.SOURCE_LINE_COLUMNS`` from one action's per-PC metrics.

    Empty when the report holds no per-instruction counters (no SourceCounters section) or
    the kernel has no line information (built without ``-lineinfo``).
    """
    names = set(action.metric_names())
    if "inst_executed" not in names:
        return []
    columns: dict[str, dict[int, float]] = {}
    wanted = dict(REP_METRICS)
    wanted.update({n: "stall_" + n[len(_REP_STALL):] for n in names
                   if n.startswith(_REP_STALL) and not n.endswith("_not_issued")})
    for metric_name, col in [*wanted.items(), ("memory_type", "_mtype"),
                             ("memory_access_type", "_atype")]:
        if metric_name not in names:
            continue
        metric = action[metric_name]
        if not metric.has_correlation_ids():
            continue
        pcs = metric.correlation_ids()
        columns[col] = {pcs.as_uint64(i): float(metric.as_double(i))
                        for i in range(metric.num_instances())}
    if "inst_executed" not in columns:
        return []
    function = action.name()
    rows = []
    # Every PC any counter names (a stall can sit on an instruction that never retired).
    pcs_seen = set().union(*(v.keys() for k, v in columns.items() if not k.startswith("_")))
    for pc in sorted(pcs_seen):
        info = action.source_info(pc)
        if info is None or not info.line():
            continue
        mtype, atype = columns.get("_mtype", {}).get(pc), columns.get("_atype", {}).get(pc)
        row = {"launch": launch, "function": function, "file": info.file_name(),
               "line": int(info.line()), "address": int(pc),
               "sass": (action.sass_by_pc(pc) or "").strip(),
               "address_space": None if mtype is None else _MEMORY_TYPE.get(
                   int(mtype), f"type {int(mtype)}"),
               "access": None if atype is None else _ACCESS_TYPE.get(
                   int(atype), f"type {int(atype)}")}
        for col, values in columns.items():
            if not col.startswith("_"):
                row[col] = values.get(pc, 0.0)
        rows.append(row)
    return rows


def read(path: str, wanted: set[str] | None, out) -> None:
    """Stream the launches of one report to ``out`` (a binary file)."""
    ncu_report = import_ncu_report()
    if ncu_report is None:
        pickle.dump(("error", "reading .ncu-rep files needs NVIDIA's ncu_report module: pip "
                     "install ncu-report (or export the report to CSV: ncu --import "
                     "FILE.ncu-rep --csv --page raw)"), out)
        return
    try:
        ctx = ncu_report.load_report(path)
    except Exception as exc:  # noqa: BLE001 - the module raises plain Exceptions
        pickle.dump(("error", f"not a readable .ncu-rep ({exc})"), out)
        return
    string_kind = getattr(ncu_report.IMetric, "ValueKind_STRING", 2)
    count = 0
    with_counters = []  # record numbers of the launches with per-PC counters
    for action in _actions(ctx):
        names, units, values, strings = [], [], [], {}
        facts = {}
        for name in action.metric_names():
            if name == "inst_executed":
                with_counters.append(count)
            keep = wanted is None or name in wanted
            if not keep and name not in FACT_METRICS:
                continue
            metric = action[name]
            if metric.kind() == string_kind:
                text, value = str(metric.as_string()), math.nan
            else:
                text, value = None, _float(metric.as_double())
            facts[name] = value
            if keep:
                names.append(name)
                units.append(metric.unit() or "")
                values.append(value)
                if text is not None:
                    strings[len(names) - 1] = text
        facts["name"] = action.name(ncu_report.IAction.NameBase_DEMANGLED)
        facts["nvtx"] = _nvtx_of(action)
        pickle.dump(("launch", facts, names, units, values, strings, _rules(action)), out)
        count += 1
    pickle.dump(("counters", with_counters), out)
    pickle.dump(("done", count), out)


def _actions(ctx):
    """Every kernel result of a loaded report, in order."""
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            yield rng.action_by_idx(a)


def read_lines(path: str, records: list[int], out) -> None:
    """Send ``("lines", record, rows)`` for each launch of ``records`` that has source lines."""
    ncu_report = import_ncu_report()
    ctx = ncu_report.load_report(path)
    wanted, last = set(records), max(records, default=-1)
    count = 0
    for record, action in enumerate(_actions(ctx)):
        if record > last:
            break
        if record in wanted:
            rows = source_lines_of_action(action, record)
            if rows:
                pickle.dump(("lines", record, rows), out)
            count += 1
    pickle.dump(("done", count), out)


def main() -> int:
    """Entry point of the child: ``python ncu_rep_child.py REPORT`` with JSON on stdin."""
    request = json.loads(sys.stdin.read() or "null")
    out = sys.stdout.buffer
    try:
        if isinstance(request, dict):  # {"lines": [record, ...]}
            read_lines(sys.argv[1], request["lines"], out)
        else:  # the metric names to keep, or null
            read(sys.argv[1], None if request is None else set(request), out)
    except Exception as exc:  # noqa: BLE001 - the native module raises plain Exceptions
        pickle.dump(("error", f"not a readable .ncu-rep ({type(exc).__name__}: {exc})"), out)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
