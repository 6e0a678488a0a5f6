"""CuPy launcher for the fast-math demo (sinf/cosf/expf vs __sinf/__cosf/__expf)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
TERMS = 32  # must match FM_TERMS
# The intrinsics carry ~4e-7 absolute error per call on [-pi, pi]; 96 calls per element summed
# give up to ~3e-5. 1e-4 accepts that and still catches a wrong formula.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}
_SIZES = {"default": 1 << 24, "small": 1 << 16}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate two sets of 16M random floats in [-1, 1) and compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(14)
    return {
        "n": n,
        "num_bufs": 2,  # one set is 128 MiB, under 3x the L2; rotate two
        "x": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32) for _ in range(2)],
        "y_bad": cp.empty(n, dtype=cp.float32),
        "y_good": cp.empty(n, dtype=cp.float32),
        "accurate": module.get_function("fast_math_accurate_trig"),
        "intrinsic": module.get_function("fast_math_intrinsic_trig"),
    }


def _launch(state: dict[str, Any], kernel: Any, y: cp.ndarray, buf: int) -> cp.ndarray:
    n = state["n"]
    kernel(((n + THREADS - 1) // THREADS,), (THREADS,), (state["x"][buf], y, np.int32(n)))
    return y


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the kernel using the accurate sinf/cosf/expf."""
    return _launch(state, state["accurate"], state["y_bad"], buf)


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the kernel using the __sinf/__cosf/__expf intrinsics."""
    return _launch(state, state["intrinsic"], state["y_good"], buf)


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Evaluate the 32-term sum in float64 (coefficients rounded to fp32 as in the kernel)."""
    x = state["x"][buf].astype(cp.float64)
    acc = cp.zeros_like(x)
    for k in range(TERMS):
        w = float(np.float32(0.5) + np.float32(0.08) * np.float32(k))
        u = float(np.float32(1.0) - np.float32(0.02) * np.float32(k))
        s = float(np.float32(0.25) + np.float32(0.05) * np.float32(k))
        acc += cp.sin(w * x) * cp.cos(u * x) + 0.5 * cp.exp(-s * x * x)
    return acc


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (read x, write y) and FLOPs (counting each transcendental as one)."""
    n = state["n"]
    # Per term: 3 multiplies for the arguments, 2 for s*v*v, sin, cos, exp, a multiply, an FMA.
    return {"bytes": 8.0 * n, "flops": 11.0 * TERMS * n}
