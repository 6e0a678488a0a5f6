"""CuPy launcher for the occupancy demo (160 KB vs 1 KB of shared memory per block)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
BLOCKS_PER_SM = 8  # same grid for both: one full wave at 100 % occupancy
HEAVY_SMEM = 160 * 1024  # two such blocks would need 322 KB > the 228 KB of an SM
LEAN_SMEM = THREADS * 4  # one float per thread for the block reduction
SCALE = np.float32(1.5)
SHIFT = np.float32(0.25)
TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}  # one fused multiply-add per element
_SIZES = {"default": 1 << 26, "small": 1 << 20}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 64M random floats, compile, and allow the heavy kernel 160 KB of shared memory."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    heavy = module.get_function("occupancy_scale_smem_heavy")
    # Above 48 KB of dynamic shared memory a kernel must opt in explicitly.
    heavy.max_dynamic_shared_size_bytes = HEAVY_SMEM
    grid = cp.cuda.Device().attributes["MultiProcessorCount"] * BLOCKS_PER_SM
    rng = cp.random.RandomState(4)
    return {
        "n": n,
        "grid": grid,
        "num_bufs": 1,  # 512 MiB per run, far above the 60 MB L2
        "x": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32)],
        "y_bad": cp.empty(n, dtype=cp.float32),
        "y_good": cp.empty(n, dtype=cp.float32),
        "block_sums": cp.empty(grid, dtype=cp.float32),
        "heavy": heavy,
        "lean": module.get_function("occupancy_scale_smem_lean"),
    }


def _launch(state: dict[str, Any], kernel: Any, y: cp.ndarray, buf: int, smem: int) -> cp.ndarray:
    args = (state["x"][buf], y, state["block_sums"], SCALE, SHIFT, np.int32(state["n"] // 4))
    kernel((state["grid"],), (THREADS,), args, shared_mem=smem)
    return y


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch with 160 KB of dynamic shared memory per block: 1 block (8 warps) per SM."""
    return _launch(state, state["heavy"], state["y_bad"], buf, HEAVY_SMEM)


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch with 1 KB of dynamic shared memory per block: 8 blocks (64 warps) per SM."""
    return _launch(state, state["lean"], state["y_good"], buf, LEAN_SMEM)


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return scale * x + shift in float64."""
    return state["x"][buf].astype(cp.float64) * float(SCALE) + float(SHIFT)


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes and FLOPs: read x once, write y once; one FMA (2 FLOP) per element."""
    n = state["n"]
    return {"bytes": 8.0 * n, "flops": 2.0 * n}
