"""CuPy launcher for the local-memory demo (local-array lookup vs warp-shuffle lookup)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

KERNELS = Path(__file__).with_name("kernels.cu")
THREADS = 256
BLOCKS_PER_SM = 8
LUT_SIZE = 64
GAIN = np.float32(0.75)
TOLERANCE = {"rtol": 0.0, "atol": 0.0}  # both kernels return exact table entries
_SIZES = {"default": 1 << 24, "small": 1 << 16}  # 32-bit code words (4 codes each)


def setup(size: str = "default") -> dict[str, Any]:
    """Allocate 16M random code words (64M codes) and a 64-entry codebook, then compile."""
    n_words = _SIZES[size]
    assert n_words % 32 == 0  # the shuffle kernel needs whole warps in its loop
    module = cp.RawModule(code=KERNELS.read_text(), options=("-lineinfo", "-std=c++17"))
    rng = cp.random.RandomState(12)
    return {
        "n_words": n_words,
        "grid": cp.cuda.Device().attributes["MultiProcessorCount"] * BLOCKS_PER_SM,
        "num_bufs": 1,  # 320 MiB per run, above 3x the 60 MB L2
        "codes": [rng.randint(0, 1 << 30, size=n_words, dtype=cp.int32).view(cp.uint32)],
        "lut": rng.standard_normal(LUT_SIZE, dtype=cp.float32),
        "out_bad": cp.empty(4 * n_words, dtype=cp.float32),
        "out_good": cp.empty(4 * n_words, dtype=cp.float32),
        "local_array": module.get_function("local_memory_array_lookup"),
        "shuffle": module.get_function("local_memory_shuffle_lookup"),
    }


def _launch(state: dict[str, Any], kernel: Any, out: cp.ndarray, buf: int) -> cp.ndarray:
    args = (state["lut"], state["codes"][buf], out, GAIN, np.int32(state["n_words"]))
    kernel((state["grid"],), (THREADS,), args)
    return out


def run_bad(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the kernel whose per-thread float[64] table lives in local memory."""
    return _launch(state, state["local_array"], state["out_bad"], buf)


def run_good(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Launch the kernel that keeps the table in two registers per lane and uses shuffles."""
    return _launch(state, state["shuffle"], state["out_good"], buf)


def reference(state: dict[str, Any], buf: int = 0) -> cp.ndarray:
    """Return the codebook entries (scaled in fp32, as the kernels do) for every code."""
    table = state["lut"] * GAIN
    codes = state["codes"][buf]
    idx = cp.stack([(codes >> (8 * k)) & 63 for k in range(4)], axis=1).ravel()
    return table[idx.astype(cp.int32)]


def work(state: dict[str, Any]) -> dict[str, float]:
    """Return bytes (4 per code word read, 16 per word written) and FLOPs (none)."""
    return {"bytes": 20.0 * state["n_words"], "flops": 0.0}
