"""CuPy launcher for the fusion demo (three elementwise kernels vs one fused kernel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
SCALE = np.float32(1.5)
SHIFT = np.float32(-0.25)
TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}  # the same two fp32 roundings in both variants
_SIZES = {"default": 1 << 26, "small": 1 << 20}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 64M random floats, the two intermediates of the unfused chain, and compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(7)
    return {
        "n": n,
        "num_bufs": 1,  # 512 MiB per fused run, far above the 60 MB L2
        "x": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32)],
        "t1": cp.empty(n, dtype=cp.float32),
        "t2": cp.empty(n, dtype=cp.float32),
        "y_bad": cp.empty(n, dtype=cp.float32),
        "y_good": cp.empty(n, dtype=cp.float32),
        "scale_shift": module.get_function("fusion_scale_shift"),
        "relu": module.get_function("fusion_relu"),
        "add_residual": module.get_function("fusion_add_residual"),
        "fused": module.get_function("fusion_fused_scale_relu_residual"),
    }


def _grid(state: dict[str, Any]) -> tuple[tuple[int], tuple[int], np.int32]:
    n4 = state["n"] // 4
    return ((n4 + THREADS - 1) // THREADS,), (THREADS,), np.int32(n4)


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the three-kernel chain (three launches, two intermediate arrays)."""
    grid, block, n4 = _grid(state)
    x, t1, t2, y = state["x"][buf], state["t1"], state["t2"], state["y_bad"]
    state["scale_shift"](grid, block, (x, t1, SCALE, SHIFT, n4))
    state["relu"](grid, block, (t1, t2, n4))
    state["add_residual"](grid, block, (t2, x, y, n4))
    return y


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the fused kernel: one launch, x read once, y written once."""
    grid, block, n4 = _grid(state)
    y = state["y_good"]
    state["fused"](grid, block, (state["x"][buf], y, SCALE, SHIFT, n4))
    return y


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return relu(x * scale + shift) + x in float64."""
    x = state["x"][buf].astype(cp.float64)
    return cp.maximum(x * float(SCALE) + float(SHIFT), 0.0) + x


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes and FLOPs: 8 bytes per element fused, 28 for the three-kernel chain."""
    n = state["n"]
    return {"bytes": 8.0 * n, "flops": 4.0 * n, "bad_bytes": 28.0 * n}
