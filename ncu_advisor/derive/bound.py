"""What limits a launch: the one definition of memory-, compute- and latency-bound.

``latency`` when both compute (SM) and memory throughput are below 60% of peak (Nsight
Compute's own threshold for a latency issue); otherwise ``memory`` or ``compute``, whichever
unit is busier (memory on a tie). The roofline panel, the ``memory_bound`` /
``compute_bound`` / ``latency_bound`` quantities rules read, and every report use this.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LATENCY_THRESHOLD_PCT = 60.0


def bound_of(sm_pct, mem_pct):
    """``"memory"``, ``"compute"``, ``"latency"``, or None/NaN where a throughput is unknown.

    Takes numbers (returns a str or None) or Series (returns an object Series).
    """
    if not isinstance(sm_pct, pd.Series):
        if sm_pct is None or mem_pct is None or np.isnan(sm_pct) or np.isnan(mem_pct):
            return None
        # The Series rule below, for one launch (a one-row Series cost ~1 ms a launch).
        sm, mem = float(sm_pct), float(mem_pct)
        if max(sm, mem) < LATENCY_THRESHOLD_PCT:
            return "latency"
        return "memory" if mem >= sm else "compute"
    sm, mem = sm_pct.astype("float64"), mem_pct.astype("float64")
    out = np.where(np.maximum(sm, mem) < LATENCY_THRESHOLD_PCT, "latency",
                   np.where(mem >= sm, "memory", "compute")).astype(object)
    out[(sm.isna() | mem.isna()).to_numpy()] = None
    return pd.Series(out, index=sm.index, dtype=object)
