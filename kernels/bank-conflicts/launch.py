"""CuPy launcher for the bank-conflicts demo (32x32 vs 32x33 shared tile transpose)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
TOLERANCE = {"rtol": 0.0, "atol": 0.0}  # a transpose is exact
_SIZES = {"default": 8192, "small": 1024}  # matrix side


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate a random 8192 x 8192 fp32 matrix (256 MiB) and compile."""
    side = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(13)
    return {
        "side": side,
        "num_bufs": 1,  # 512 MiB per run, far above the 60 MB L2
        "x": [rng.uniform(-1.0, 1.0, (side, side), dtype=cp.float32)],
        "y_bad": cp.empty((side, side), dtype=cp.float32),
        "y_good": cp.empty((side, side), dtype=cp.float32),
        "unpadded": module.get_function("bank_conflicts_transpose_unpadded"),
        "padded": module.get_function("bank_conflicts_transpose_padded"),
    }


def _launch(state: dict[str, Any], kernel: Any, y: cp.ndarray, buf: int) -> cp.ndarray:
    side = state["side"]
    kernel((side // 32, side // 32), (32, 8), (state["x"][buf], y, np.int32(side)))
    return y


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the transpose through an unpadded 32 x 32 tile (32-way conflicts on reads)."""
    return _launch(state, state["unpadded"], state["y_bad"], buf)


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the transpose through a padded 32 x 33 tile (conflict-free)."""
    return _launch(state, state["padded"], state["y_good"], buf)


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return the transpose."""
    return cp.ascontiguousarray(state["x"][buf].T)


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (read once, write once) and FLOPs (none)."""
    return {"bytes": 8.0 * state["side"] ** 2, "flops": 0.0}
