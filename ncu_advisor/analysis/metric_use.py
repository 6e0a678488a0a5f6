"""Which ncu metrics the analysis reads, so readers can keep only those (lean reading).

A full-set capture holds about 2,200 metrics per launch; the analysis reads a few hundred.
Readers given ``metrics=analysis_metrics()`` keep just these, which bounds memory on exports
of tens of thousands of launches. The set is collected from the analysis modules themselves
(every metric-name string in their source and in their module-level tables), so a metric
added to a quantity, the roofline or the occupancy calculator is kept without a second list
to update; ``tests/test_robust.py`` checks that the lean read analyzes identically.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import re
from functools import lru_cache

# Renderers are read from source only: their metric names are literals, and importing them
# (jinja2, matplotlib) cost a JSON or text run ~0.5 s. Named here, found by import machinery:
# a name that does not resolve is an error (tests/test_robust.py reads the lean set).
_SOURCE_ONLY = ("ncu_advisor.render.html_view", "ncu_advisor.render.formats",
                "ncu_advisor.render.text", "ncu_advisor.render.charts")


def _modules() -> list:
    """The modules whose code reads metrics from a Report, as imported objects.

    A module that moves or goes fails here, at import, instead of shrinking the lean set.
    """
    from ..derive import (
        gpu_specs,
        launch_shape,
        ncu_evidence,
        occupancy,
        occupancy_report,
        origin,
        quantities,
        roofline,
    )
    from ..readers import dispatch
    from ..rules_engine import engine, functions
    from . import regions, result, validity

    return [result, dispatch, quantities, roofline, occupancy, occupancy_report, launch_shape,
            gpu_specs, engine, functions, origin, ncu_evidence, regions, validity]


# Anything shaped like an ncu metric name ("dram__bytes.sum", "inst_executed"); a few other
# identifiers match too, which only keeps a column more.
_METRIC = re.compile(r"^[a-z][a-z0-9.]*_[a-z0-9_.]*$")


def _walk(value, out: set[str], depth: int = 0) -> None:
    """Collect metric names from a module-level value (tables, tuples, dataclasses)."""
    if depth > 6:
        return
    if isinstance(value, str):
        if _METRIC.match(value):
            out.add(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _walk(k, out, depth + 1)
            _walk(v, out, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            _walk(v, out, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _walk(getattr(value, f.name), out, depth + 1)


def _walk_values(module, out: set[str]) -> None:
    """Collect metric names from a module's tables (its module-level values)."""
    for value in vars(module).values():
        if not inspect.ismodule(value) and not callable(value) or dataclasses.is_dataclass(
                value):
            _walk(value, out)


def _source_tree(name: str) -> ast.Module | None:
    """A module's syntax tree read from its file, without importing it (None: no source)."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ModuleNotFoundError(f"metric_use lists {name}, which does not exist")
    if not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            return ast.parse(fh.read())
    except OSError:
        return None


def lean_reading() -> dict[str, frozenset[str]]:
    """``read_report`` arguments that keep only what the analysis reads (metrics, texts)."""
    return {"metrics": analysis_metrics(), "texts": analysis_texts()}


def analysis_texts() -> frozenset[str]:
    """Return the metrics whose exported text the analysis reads where it is a number.

    The occupancy calculator reads how many digits a byte size was printed with, to undo
    the rounding of a details page; every other text it reads is not a number (GPU name,
    cache preference, ``n/a``).
    """
    from ..derive.occupancy_report import EXPORTED_TEXT_METRICS

    return frozenset(EXPORTED_TEXT_METRICS)


@lru_cache(maxsize=1)
def analysis_metrics() -> frozenset[str]:
    """Return every metric name the analysis (quantities, roofline, occupancy, rules) reads."""
    names: set[str] = set()
    trees = []
    for module in _modules():
        _walk_values(module, names)
        try:
            trees.append(ast.parse(inspect.getsource(module)))
        except (OSError, TypeError):  # no source shipped: the tables above still count
            continue
    for name in _SOURCE_ONLY:
        tree = _source_tree(name)
        if tree is None:  # no source shipped: fall back to importing it
            _walk_values(importlib.import_module(name), names)
        else:
            trees.append(tree)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                # Literals also appear inside f-strings and comprehensions over suffixes.
                for part in re.split(r"[\s,;()\"'`{}]+", node.value):
                    if _METRIC.match(part):
                        names.add(part)
    return frozenset(names)
