"""CuPy launcher for the launch-config demo (16-block grid vs one full wave of blocks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
TINY_GRID = 16  # fewer blocks than the 132 SMs of an H200
BLOCKS_PER_SM = 8  # 8 x 256 threads fill an SM
SCALE = np.float32(1.5)
SHIFT = np.float32(0.25)
TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}
_SIZES = {"default": 1 << 26, "small": 1 << 20}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 64M random floats (256 MiB in, 256 MiB out per variant) and compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(5)
    return {
        "n": n,
        "grid_good": cp.cuda.Device().attributes["MultiProcessorCount"] * BLOCKS_PER_SM,
        "num_bufs": 1,  # 512 MiB per run, far above the 60 MB L2
        "x": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32)],
        "y_bad": cp.empty(n, dtype=cp.float32),
        "y_good": cp.empty(n, dtype=cp.float32),
        "tiny": module.get_function("launch_config_tiny_grid_scale"),
        "full": module.get_function("launch_config_full_grid_scale"),
    }


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch 16 blocks of 256 threads; the grid-stride loop covers the array anyway."""
    y = state["y_bad"]
    args = (state["x"][buf], y, SCALE, SHIFT, np.int32(state["n"] // 4))
    state["tiny"]((TINY_GRID,), (THREADS,), args)
    return y


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch 8 blocks per SM (1056 on an H200): every SM busy, one wave."""
    y = state["y_good"]
    args = (state["x"][buf], y, SCALE, SHIFT, np.int32(state["n"] // 4))
    state["full"]((state["grid_good"],), (THREADS,), args)
    return y


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return scale * x + shift in float64."""
    return state["x"][buf].astype(cp.float64) * float(SCALE) + float(SHIFT)


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes and FLOPs: read x once, write y once; one FMA per element."""
    n = state["n"]
    return {"bytes": 8.0 * n, "flops": 2.0 * n}
