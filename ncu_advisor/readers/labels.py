"""Resolve metric labels ("DRAM Throughput") to ncu metric names.

The default details page prints labels only.  ``data/metric_labels.csv`` maps
(section, body item, label, occurrence) to the metric name; it is generated from real
``--print-metric-name label-name`` captures by ``scripts/build_label_table.py``, never typed
by hand.  ``occurrence`` numbers repeated labels within one launch and section (the roofline
chart sections repeat labels for different metrics), in export order.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np
import pandas as pd

KEY = ["section", "body_item", "label", "occurrence"]


@lru_cache(maxsize=1)
def label_table() -> pd.DataFrame:
    """Return the shipped label table (columns ``KEY`` + ``metric``)."""
    with resources.files("ncu_advisor").joinpath("data/metric_labels.csv").open("r") as fh:
        table = pd.read_csv(fh, dtype=str, keep_default_na=False)
    table["occurrence"] = table["occurrence"].astype(int)
    return table


def _codes(values: pd.Series) -> tuple[np.ndarray, int]:
    # Factorized as stored: as Python objects, a text column of 5.8 M rows was ~1 GB.
    codes, uniques = pd.factorize(values.fillna(""), sort=False)
    return codes.astype(np.int64), len(uniques)


def resolve_labels(metrics: pd.DataFrame) -> pd.DataFrame:
    """Fill ``metric`` for rows that only carry a label, using the shipped table.

    Vectorized over integer keys: rows are grouped by (section, body item, label), numbered
    within each launch (the occurrence), and only the distinct keys are looked up.
    """
    need = (metrics["metric"].isna() & metrics["label"].notna()).to_numpy()
    if not need.any():
        return metrics
    # The key columns only, rows taken by position: .loc copied every column (texts too).
    rows = np.flatnonzero(need)
    keys = [c for c in ("launch", "section", "body_item", "label") if c in metrics]
    sub = (metrics[keys].reset_index(drop=True) if len(rows) == len(metrics) else
           pd.DataFrame({c: metrics[c].iloc[rows].reset_index(drop=True) for c in keys}))
    sec, n_sec = _codes(sub["section"])
    body, n_body = _codes(sub["body_item"]) if "body_item" in sub else (np.zeros(len(sub),
                                                                               np.int64), 1)
    lab, n_lab = _codes(sub["label"])
    combo = (sec * n_body + body) * n_lab + lab
    per_launch = sub["launch"].to_numpy().astype(np.int64) * (n_sec * n_body * n_lab) + combo
    occurrence = pd.Series(per_launch).groupby(per_launch, sort=False).cumcount().to_numpy()
    key = combo * 1_000_000 + occurrence
    uniq, inverse = np.unique(key, return_inverse=True)
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(key))[::-1]
    lookup = pd.DataFrame({
        "section": sub["section"].iloc[first].to_numpy(dtype=object),
        "body_item": (sub["body_item"].iloc[first].to_numpy(dtype=object) if "body_item" in sub
                      else ""),
        "label": sub["label"].iloc[first].to_numpy(dtype=object),
        "occurrence": occurrence[first],
    })
    found = lookup.merge(label_table(), on=KEY, how="left")["metric"].to_numpy(dtype=object)
    if need.all():  # labels only (the default details page, text): no copy of the names
        column = found[inverse]
    else:
        column = metrics["metric"].to_numpy(dtype=object).copy()
        column[need] = found[inverse]
    # assign, not copy(): a deep copy took every text again (~100 MB at 150 MB of details).
    return metrics.assign(metric=column)
