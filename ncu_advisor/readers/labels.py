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

import pandas as pd

KEY = ["section", "body_item", "label", "occurrence"]


@lru_cache(maxsize=1)
def label_table() -> pd.DataFrame:
    """Return the shipped label table (columns ``KEY`` + ``metric``)."""
    with resources.files("ncu_advisor").joinpath("data/metric_labels.csv").open("r") as fh:
        table = pd.read_csv(fh, dtype=str, keep_default_na=False)
    table["occurrence"] = table["occurrence"].astype(int)
    return table


def resolve_labels(metrics: pd.DataFrame) -> pd.DataFrame:
    """Fill ``metric`` for rows that only carry a label, using the shipped table."""
    need = metrics["metric"].isna() & metrics["label"].notna()
    if not need.any():
        return metrics
    metrics = metrics.copy()
    metrics["body_item"] = metrics["body_item"].fillna("")
    metrics["occurrence"] = metrics.groupby(
        ["launch", "section", "body_item", "label"], sort=False).cumcount()
    todo = metrics.loc[need, KEY].reset_index()
    found = todo.merge(label_table(), on=KEY, how="left").set_index("index")["metric"]
    metrics.loc[found.index, "metric"] = found.to_numpy()
    return metrics.drop(columns="occurrence")
