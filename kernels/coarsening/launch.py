"""CuPy launcher for the coarsening demo (scalar vs float4 grid-stride vs float3 vector add)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
BLOCKS_PER_SM = 32  # 4 waves of 8 x 256 threads; each thread loops over ~12 float4s
TOLERANCE = {"rtol": 1e-6, "atol": 1e-7}  # one fp32 rounding vs a float64 sum
# 3 x 2^24 elements: divisible by 3 (float3) and 4 (float4); three arrays of 192 MiB.
_SIZES = {"default": 3 << 24, "small": 3 << 18}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate two random inputs of 48M floats and one output per variant, then compile."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(3)
    sm_count = cp.cuda.Device().attributes["MultiProcessorCount"]
    return {
        "n": n,
        "num_bufs": 1,  # 576 MiB per run, far above the 60 MB L2
        "a": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32)],
        "b": [rng.uniform(-1.0, 1.0, n, dtype=cp.float32)],
        "c_bad": cp.empty(n, dtype=cp.float32),
        "c_good": cp.empty(n, dtype=cp.float32),
        "c_float3": cp.empty(n, dtype=cp.float32),
        "grid_good": sm_count * BLOCKS_PER_SM,
        "scalar": module.get_function("coarsening_add_scalar"),
        "float4": module.get_function("coarsening_add_float4"),
        "float3": module.get_function("coarsening_add_float3"),
    }


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the scalar kernel: one element per thread, n / 256 blocks."""
    n = state["n"]
    c = state["c_bad"]
    state["scalar"](
        ((n + THREADS - 1) // THREADS,),
        (THREADS,),
        (state["a"][buf], state["b"][buf], c, np.int32(n)),
    )
    return c


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the float4 kernel: grid-stride loop over 32 blocks per SM."""
    c = state["c_good"]
    state["float4"](
        (state["grid_good"],),
        (THREADS,),
        (state["a"][buf], state["b"][buf], c, np.int32(state["n"] // 4)),
    )
    return c


def run_float3(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the extra float3 kernel: one float3 (three scalar accesses) per thread."""
    n3 = state["n"] // 3
    c = state["c_float3"]
    state["float3"](
        ((n3 + THREADS - 1) // THREADS,),
        (THREADS,),
        (state["a"][buf], state["b"][buf], c, np.int32(n3)),
    )
    return c


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return the exact sum in float64."""
    return state["a"][buf].astype(cp.float64) + state["b"][buf]


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (read a and b once, write c once) and FLOPs (one add per element)."""
    n = state["n"]
    return {"bytes": 12.0 * n, "flops": 1.0 * n}
