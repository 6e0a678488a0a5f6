"""CuPy launcher for the tiling demo (naive vs shared-memory tiled fp32 matmul)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
NUM_BUFS = 4  # one set (A, B, C) is 48 MiB, under the 60 MB L2: rotate four
# Entries of C are sums of 2048 products of values in [-1, 1) (typical size ~15); fp32
# accumulation in different orders differs from the float64 product by ~1e-4 at most.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-3}
_SIZES = {"default": 2048, "small": 256}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate four sets of random 2048 x 2048 fp32 matrices and compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(10)
    return {
        "n": n,
        "num_bufs": NUM_BUFS,
        "a": [rng.uniform(-1.0, 1.0, (n, n), dtype=cp.float32) for _ in range(NUM_BUFS)],
        "b": [rng.uniform(-1.0, 1.0, (n, n), dtype=cp.float32) for _ in range(NUM_BUFS)],
        "c_bad": cp.empty((n, n), dtype=cp.float32),
        "c_good": cp.empty((n, n), dtype=cp.float32),
        "naive": module.get_function("tiling_naive_matmul"),
        "tiled": module.get_function("tiling_smem_matmul"),
    }


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the naive kernel: one thread per element of C, blocks of 32 x 8."""
    n = state["n"]
    c = state["c_bad"]
    dims = (np.int32(n), np.int32(n), np.int32(n))
    state["naive"]((n // 32, n // 8), (32, 8), (state["a"][buf], state["b"][buf], c, *dims))
    return c


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the tiled kernel: a 64 x 64 tile of C per block of 256 threads."""
    n = state["n"]
    c = state["c_good"]
    dims = (np.int32(n), np.int32(n), np.int32(n))
    state["tiled"]((n // 64, n // 64), (256,), (state["a"][buf], state["b"][buf], c, *dims))
    return c


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return A @ B computed in float64."""
    return state["a"][buf].astype(cp.float64) @ state["b"][buf].astype(cp.float64)


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (A, B read once, C written once) and FLOPs (2 n^3)."""
    n = state["n"]
    return {"bytes": 12.0 * n * n, "flops": 2.0 * n**3}
