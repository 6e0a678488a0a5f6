"""The one evaluator of rule conditions, and what a condition needs to be judged.

A condition is evaluated on every launch at once (one boolean per row of the quantity table);
a single set of values is a one-row table, so there is no second, per-row evaluator to keep in
agreement with this one. A missing value never makes a comparison true (``not`` of it is).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .schema import All, Any_, Comparison, Not

_COMPARE = {
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name in frame:
        return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
    return np.full(len(frame), np.nan)


def condition_mask(cond, frame: pd.DataFrame) -> np.ndarray:
    """Evaluate a condition on every row of ``frame`` (columns are quantity names)."""
    if isinstance(cond, All):
        return np.logical_and.reduce([condition_mask(c, frame) for c in cond.all])
    if isinstance(cond, Any_):
        return np.logical_or.reduce([condition_mask(c, frame) for c in cond.any])
    if isinstance(cond, Not):
        return ~condition_mask(cond.not_, frame)
    assert isinstance(cond, Comparison)
    left = _column(frame, cond.q)
    rhs = getattr(cond, cond.op)
    right = (_column(frame, rhs) if isinstance(rhs, str)
             else np.full(len(frame), float(rhs))) * cond.times
    known = ~(np.isnan(left) | np.isnan(right))
    with np.errstate(invalid="ignore"):
        return _COMPARE[cond.op](left, right) & known


def holds(cond, values: Mapping[str, float]) -> bool:
    """Whether a condition holds for one set of quantity values (a one-row table)."""
    return bool(condition_mask(cond, pd.DataFrame([dict(values)]))[0])


def severity_levels(rule, frame: pd.DataFrame) -> np.ndarray:
    """The severity of ``rule`` on every row: the first step whose condition holds."""
    levels = np.full(len(frame), rule.severity[-1].level, dtype=object)
    decided = np.zeros(len(frame), dtype=bool)
    for step in rule.severity:
        hit = ~decided if step.when is None else (~decided & condition_mask(step.when, frame))
        levels[hit] = step.level
        decided |= hit
    return levels


def necessary_quantities(cond) -> set[str]:
    """The quantities every way of satisfying ``cond`` reads (see ``Rule.needs``)."""
    return set() if cond is None else cond.necessary()
