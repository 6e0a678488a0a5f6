"""CuPy launcher for the divergence demo (interleaved kinds vs warp-uniform mapping)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
STEPS_A = 128  # must match DIVERGENCE_STEPS_A
STEPS_B = 160  # must match DIVERGENCE_STEPS_B
# Both maps contract (|derivative| <= 0.98), so fp32 rounding errors stay below ~1e-5.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
_SIZES = {"default": 1 << 24, "small": 1 << 16}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 16M random items with alternating kinds (two input sets) and compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(6)
    # Kinds alternate A, B, A, B, ...: every warp of the naive mapping sees both.
    kind = (cp.arange(n) & 1).astype(cp.uint8)
    return {
        "n": n,
        "num_bufs": 2,  # one set is 144 MiB, under 3x the L2; rotate two
        "x": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32) for _ in range(2)],
        "kind": kind,
        "y_bad": cp.empty(n, dtype=cp.float32),
        "y_good": cp.empty(n, dtype=cp.float32),
        "interleaved": module.get_function("divergence_interleaved_paths"),
        "uniform": module.get_function("divergence_warp_uniform_paths"),
    }


def _launch(state: dict[str, Any], kernel: Any, y: cp.ndarray, buf: int) -> cp.ndarray:
    n = state["n"]
    kernel(
        ((n + THREADS - 1) // THREADS,),
        (THREADS,),
        (state["x"][buf], state["kind"], y, np.int32(n)),
    )
    return y


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch with thread i on item i: each warp runs both loops."""
    return _launch(state, state["interleaved"], state["y_bad"], buf)


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch with the remapped threads: each warp runs one loop."""
    return _launch(state, state["uniform"], state["y_good"], buf)


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Iterate both maps in float64 on their own items."""
    x = state["x"][buf].astype(cp.float64)
    kind = state["kind"].astype(cp.bool_)
    a = x[~kind]
    for _ in range(STEPS_A):
        a = 0.98 * a - 0.02 * a * a * a + 0.01
    b = x[kind]
    for _ in range(STEPS_B):
        b = 0.97 * b + 0.015 * b * b - 0.02
    out = cp.empty_like(x)
    out[~kind] = a
    out[kind] = b
    return out


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (x, kind, y once each) and FLOPs (kind A: 5 per step, kind B: 4 per step)."""
    n = state["n"]
    flops = n / 2 * (5 * STEPS_A + 4 * STEPS_B)
    return {"bytes": 9.0 * n, "flops": flops}
