"""Reader for ``.ncu-rep`` files through NVIDIA's ``ncu_report`` module.

The ``ncu-report`` wheel on PyPI reads reports offline (no CUDA, no ncu); where it is missing,
the ``extras/python`` folder of an Nsight Compute install works too (``NCU_REPORT_PATH`` or
the usual install folders are tried).
"""

from __future__ import annotations

import glob
import importlib
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ReportParseError
from ..report import LAUNCH_COLUMNS, METRIC_COLUMNS, RULE_COLUMNS, Report
from .common import short_name
from .source_page import source_lines_frame, source_lines_of_action

# The ncu_report module's own MsgType enum (OK 1, OPTIMIZATION 2, WARNING 3, ERR 4); it differs
# from the numbering inside the report file. Checked against the CSV export of the same report.
_MSG_TYPE = {0: None, 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPE = {0: None, 1: "local", 2: "global"}
_REP_MAGIC = b"NVR\x00"  # first bytes of every report ncu 2025.3 writes


def _import_ncu_report():
    """Import ``ncu_report`` from the wheel, or from an Nsight Compute install."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    candidates = [os.environ.get("NCU_REPORT_PATH", "")]
    candidates += sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)
    candidates += sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python"), reverse=True)
    for folder in filter(None, candidates):
        if Path(folder, "ncu_report.py").exists():
            sys.path.insert(0, folder)
            try:
                return importlib.import_module("ncu_report")
            except ImportError:
                sys.path.remove(folder)
    raise ReportParseError(
        "reading .ncu-rep files needs NVIDIA's ncu_report module: pip install ncu-report "
        "(or export the report to CSV: ncu --import FILE.ncu-rep --csv --page raw)"
    )


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


def read_ncu_rep(path: Path) -> Report:
    """Read every kernel result of a ``.ncu-rep`` file."""
    with path.open("rb") as fh:
        head = fh.read(len(_REP_MAGIC))  # the header only: reports run to tens of MB
    if not head:
        raise ReportParseError(f"{path}: file is empty")
    if not head.startswith(_REP_MAGIC):
        raise ReportParseError(f"{path}: not a readable .ncu-rep (no Nsight Compute report "
                               "header)")
    ncu_report = _import_ncu_report()
    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as exc:  # noqa: BLE001 - the module raises plain Exceptions
        raise ReportParseError(f"{path}: not a readable .ncu-rep ({exc})") from None
    launch_rows, metric_rows, rule_rows, source_rows = [], [], [], []
    idx = 0
    string_kind = getattr(ncu_report.IMetric, "ValueKind_STRING", 2)
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            values: dict[str, float] = {}
            for name in action.metric_names():
                metric = action[name]
                unit = metric.unit() or ""
                if metric.kind() == string_kind:
                    text = metric.as_string()
                    value = np.nan
                else:
                    value = float(metric.as_double())
                    text = repr(value)
                values[name] = value
                metric_rows.append((idx, None, name, None, unit, value, text))
            demangled = action.name(ncu_report.IAction.NameBase_DEMANGLED)

            def get(metric_name: str, values=values) -> float:
                return values.get(metric_name, np.nan)

            cc_major, cc_minor = (get("device__attribute_compute_capability_major"),
                                  get("device__attribute_compute_capability_minor"))
            launch_rows.append({
                "launch": idx, "source": str(path), "form": "ncu-rep", "id": idx,
                "process_id": None, "process": None, "host": None, "name": demangled,
                "short_name": short_name(demangled),
                "grid_x": get("launch__grid_dim_x"), "grid_y": get("launch__grid_dim_y"),
                "grid_z": get("launch__grid_dim_z"), "block_x": get("launch__block_dim_x"),
                "block_y": get("launch__block_dim_y"), "block_z": get("launch__block_dim_z"),
                "device": get("launch__device_id"),
                "cc": None if np.isnan(cc_major) else f"{int(cc_major)}.{int(cc_minor)}",
                "context": get("launch__context_id"), "stream": get("launch__stream_id"),
                "nvtx": _nvtx_of(action), "duration_ns": get("gpu__time_duration.sum"),
                "invocations": 1,
            })
            for result in action.rule_results_as_dicts():
                message = result.get("rule_message") or {}
                speedup = result.get("speedup_estimation") or {}
                rule_rows.append({
                    "launch": idx, "section": result.get("section_identifier"),
                    "rule": result.get("rule_identifier"),
                    "type": _MSG_TYPE.get(int(message.get("type", 0) or 0)),
                    "title": message.get("title"), "description": message.get("message"),
                    "speedup_type": _SPEEDUP_TYPE.get(int(speedup.get("type", 0) or 0)),
                    "speedup": speedup.get("speedup", np.nan),
                })
            source_rows.extend(source_lines_of_action(action, idx))
            idx += 1
    if not launch_rows:
        raise ReportParseError(f"{path}: the report holds no profiled kernels")
    launches = pd.DataFrame(launch_rows, columns=LAUNCH_COLUMNS)
    for col in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "id", "device",
                "context", "stream"):
        launches[col] = pd.to_numeric(launches[col]).round().astype("Int64")
    metrics = pd.DataFrame(metric_rows, columns=METRIC_COLUMNS)
    rules = pd.DataFrame(rule_rows, columns=RULE_COLUMNS)
    # ncu's rule text uses @section:Id:Label@ / @url:Text:URL@ markup; show the text.
    rules["description"] = rules["description"].str.replace(
        r"@section:[^:@]*:([^@]*)@", r"\1", regex=True).str.replace(
        r"@url:([^:@]*):([^@]*)@", r"\1 (\2)", regex=True)
    return Report(launches=launches, metrics=metrics, ncu_rules=rules, sources=[str(path)],
                  source_lines=source_lines_frame(source_rows))
