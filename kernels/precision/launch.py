"""CuPy launcher for the precision demo (fp32 vs fp16/half2 axpy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
ALPHA = np.float32(0.5)
# fp16 has an 11-bit significand (unit roundoff 4.9e-4). Quantizing x and y and rounding the
# result costs up to ~1.5e-3 absolute for values in [-1.5, 1.5]; fp32 passes with room to spare.
TOLERANCE = {"rtol": 2e-3, "atol": 2e-3}
_SIZES = {"default": 1 << 26, "small": 1 << 20}


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 64M random fp32 pairs and their fp16 copies (stored once, as a model would)."""
    n = _SIZES[size]
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(8)
    x = rng.uniform(-1.0, 1.0, n, dtype=cp.float32)
    y = rng.uniform(-1.0, 1.0, n, dtype=cp.float32)
    return {
        "n": n,
        "num_bufs": 1,  # 768 MiB (fp32) and 384 MiB (fp16) per run, far above the 60 MB L2
        "x32": [x],
        "y32": [y],
        "x16": [x.astype(cp.float16)],
        "y16": [y.astype(cp.float16)],
        "out32": cp.empty(n, dtype=cp.float32),
        "out16": cp.empty(n, dtype=cp.float16),
        "fp32": module.get_function("precision_axpy_fp32"),
        "half2": module.get_function("precision_axpy_half2"),
    }


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the fp32 kernel: 4 elements (16 bytes per array) per thread."""
    n4 = state["n"] // 4
    out = state["out32"]
    args = (state["x32"][buf], state["y32"][buf], out, ALPHA, np.int32(n4))
    state["fp32"](((n4 + THREADS - 1) // THREADS,), (THREADS,), args)
    return out


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the fp16 kernel: 8 elements (16 bytes per array) per thread, HFMA2 math."""
    n8 = state["n"] // 8
    out = state["out16"]
    args = (state["x16"][buf], state["y16"][buf], out, ALPHA, np.int32(n8))
    state["half2"](((n8 + THREADS - 1) // THREADS,), (THREADS,), args)
    return out


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return alpha * x + y from the fp32 data, in float64."""
    return state["x32"][buf].astype(cp.float64) * float(ALPHA) + state["y32"][buf]


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes and FLOPs: 6 bytes per element in fp16, 12 in fp32; one FMA each."""
    n = state["n"]
    return {"bytes": 6.0 * n, "flops": 2.0 * n, "bad_bytes": 12.0 * n}
