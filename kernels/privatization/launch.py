"""CuPy launcher for the privatization demo (global-atomic vs shared-memory histogram)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
BLOCKS_PER_SM = 8
BINS = 16  # must match PRIV_BINS
TOLERANCE = {"rtol": 0.0, "atol": 0.0}  # integer counts are exact
_SIZES = {"default": 1 << 26, "small": 1 << 20}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 64M random 32-bit keys (256 MiB) and compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(9)
    keys = rng.randint(0, 1 << 30, size=n, dtype=cp.int32).view(cp.uint32)
    return {
        "n": n,
        "grid": cp.cuda.Device().attributes["MultiProcessorCount"] * BLOCKS_PER_SM,
        "num_bufs": 1,  # 256 MiB per run, above 3x the 60 MB L2
        "keys": [keys],
        "hist_bad": cp.empty(BINS, dtype=cp.uint32),
        "hist_good": cp.empty(BINS, dtype=cp.uint32),
        "global_atomic": module.get_function("privatization_global_atomic_hist"),
        "shared": module.get_function("privatization_shared_hist"),
    }


def _launch(state: dict[str, Any], kernel: Any, hist: cp.ndarray, buf: int) -> cp.ndarray:
    # cudaMemsetAsync, not a kernel: it does not show up as an extra launch in the profile.
    hist.data.memset_async(0, hist.nbytes)
    kernel((state["grid"],), (THREADS,), (state["keys"][buf], hist, np.int32(state["n"] // 4)))
    return hist


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the histogram with one global atomic add per key."""
    return _launch(state, state["global_atomic"], state["hist_bad"], buf)


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the histogram with per-block shared-memory counts merged once per block."""
    return _launch(state, state["shared"], state["hist_good"], buf)


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Count keys per bin with cupy.bincount."""
    bins = (state["keys"][buf] & (BINS - 1)).astype(cp.int32)
    return cp.bincount(bins, minlength=BINS)


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (each key read once) and FLOPs (none)."""
    return {"bytes": 4.0 * state["n"], "flops": 0.0}
