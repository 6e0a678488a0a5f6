"""Child process that reads a ``.ncu-rep`` through NVIDIA's ``ncu_report`` (native code).

Run as a script (``python ncu_rep_child.py REPORT``) so that it imports neither pandas nor the
package: a damaged report can make the native reader abort the whole process (SIGABRT), and
that must end this child, not the user's command. The metric names to keep come as JSON on
stdin (``null``: all); results go to stdout as a stream of pickled records, one per launch,
so neither side holds the whole report twice:

* ``("launch", facts, names, units, values, strings, rules)`` per kernel result;
* ``("done", count)`` at the end, or ``("error", message)``.

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
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            names, units, values, strings = [], [], [], {}
            facts = {}
            for name in action.metric_names():
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
    pickle.dump(("done", count), out)


def main() -> int:
    """Entry point of the child: ``python ncu_rep_child.py REPORT`` with JSON on stdin."""
    wanted = json.loads(sys.stdin.read() or "null")
    out = sys.stdout.buffer
    try:
        read(sys.argv[1], None if wanted is None else set(wanted), out)
    except Exception as exc:  # noqa: BLE001 - the native module raises plain Exceptions
        pickle.dump(("error", f"not a readable .ncu-rep ({type(exc).__name__}: {exc})"), out)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
