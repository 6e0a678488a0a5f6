"""CuPy launcher for the roofline demo (memory-bound vs compute-bound kernel, same result)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
STEPS = 256  # must match ROOFLINE_STEPS in kernels.cu
A = np.float32(0.999)  # recurrence v <- A*v + B; |A| < 1 keeps values bounded
B = np.float32(0.001)
THREADS = 256
# 256 sequential FMAs accumulate a few ulps of rounding; the closed form rounds A^256 once.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}
_SIZES = {"default": 1 << 26, "small": 1 << 20}


def _closed_form() -> tuple[float, float]:
    """Return (A^K, B * (A^K - 1) / (A - 1)), the recurrence folded into one affine map."""
    a, b = float(A), float(B)
    ak = a**STEPS
    return ak, b * (ak - 1.0) / (a - 1.0)


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 64M random floats (256 MiB in, 256 MiB out) and compile the kernels."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(1)
    x = rng.uniform(-1.0, 1.0, n, dtype=cp.float32)
    return {
        "n": n,
        "num_bufs": 1,  # 512 MiB per run, far above the 60 MB L2
        "x": [x],
        "y_bad": cp.empty(n, dtype=cp.float32),
        "y_good": cp.empty(n, dtype=cp.float32),
        "memory_bound": module.get_function("roofline_memory_bound_axpb"),
        "compute_bound": module.get_function("roofline_compute_bound_poly"),
    }


def _grid(state: dict[str, Any]) -> tuple[int, int]:
    n4 = state["n"] // 4
    return (n4 + THREADS - 1) // THREADS, n4


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the memory-bound kernel: one FMA per element (closed form of the recurrence)."""
    blocks, n4 = _grid(state)
    ak, bk = _closed_form()
    y = state["y_bad"]
    state["memory_bound"](
        (blocks,), (THREADS,), (state["x"][buf], y, np.float32(ak), np.float32(bk), np.int32(n4))
    )
    return y


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the compute-bound kernel: 256 dependent FMAs per element on the same data."""
    blocks, n4 = _grid(state)
    y = state["y_good"]
    state["compute_bound"]((blocks,), (THREADS,), (state["x"][buf], y, A, B, np.int32(n4)))
    return y


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return the closed form of the 256-step recurrence, evaluated in float64."""
    ak, bk = _closed_form()
    return state["x"][buf].astype(cp.float64) * ak + bk


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes and FLOPs: both kernels move 8 bytes per element; FLOPs differ by 256x."""
    n = state["n"]
    return {"bytes": 8.0 * n, "flops": 2.0 * STEPS * n, "bad_flops": 2.0 * n}
