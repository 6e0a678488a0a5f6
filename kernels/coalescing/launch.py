"""CuPy launcher for the coalescing demo (column-order strided copy vs contiguous copy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
LOG2_COLS = 5  # 32 columns: neighbouring lanes of the strided kernel are 512 bytes apart
TOLERANCE = {"rtol": 0.0, "atol": 0.0}  # a copy is exact
_SIZES = {"default": 1 << 26, "small": 1 << 20}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 64M random floats (256 MiB in, 256 MiB out per variant) and compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(2)
    return {
        "n": n,
        "log2_rows": n.bit_length() - 1 - LOG2_COLS,
        "num_bufs": 1,  # 512 MiB per run, far above the 60 MB L2
        "x": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32)],
        "y_bad": cp.empty(n, dtype=cp.float32),
        "y_good": cp.empty(n, dtype=cp.float32),
        "strided": module.get_function("coalescing_strided_copy"),
        "contiguous": module.get_function("coalescing_contiguous_copy"),
    }


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the strided copy: each thread copies 4 elements taken in column order."""
    n4 = state["n"] // 4
    y = state["y_bad"]
    state["strided"](
        ((n4 + THREADS - 1) // THREADS,),
        (THREADS,),
        (state["x"][buf], y, np.int32(state["log2_rows"]), np.int32(LOG2_COLS), np.int32(n4)),
    )
    return y


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the contiguous copy: one float4 per thread, 512 adjacent bytes per warp."""
    n4 = state["n"] // 4
    y = state["y_good"]
    state["contiguous"](
        ((n4 + THREADS - 1) // THREADS,), (THREADS,), (state["x"][buf], y, np.int32(n4))
    )
    return y


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return the input: both kernels copy it unchanged."""
    return state["x"][buf]


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (read every element once, write it once) and FLOPs (none)."""
    return {"bytes": 8.0 * state["n"], "flops": 0.0}
