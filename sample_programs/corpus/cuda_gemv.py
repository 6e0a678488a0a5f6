"""Dense matrix-vector products in CuPy raw kernels and through cuBLAS.

A is 16384 x 8192 float32, row-major. y = A x with one thread per row (each thread walks its
own row, so a warp touches 32 rows far apart) and with one warp per row (lanes stride along
the row, shuffle reduction); z = A^T y with one thread per column (neighbouring threads read
neighbouring columns); cuBLAS (``A @ x`` and ``A.T @ y``) as the library control.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

GEMV_SRC = r"""
extern "C" __global__ void gemv_thread_per_row(const float* __restrict__ A,
                                               const float* __restrict__ x,
                                               float* __restrict__ y, int m, int n)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m) return;
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += A[(size_t)row * n + j] * x[j];
    y[row] = sum;
}

extern "C" __global__ void gemv_warp_per_row(const float* __restrict__ A,
                                             const float* __restrict__ x,
                                             float* __restrict__ y, int m, int n)
{
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= m) return;
    const float* a = A + (size_t)row * n;
    float sum = 0.0f;
    for (int j = lane; j < n; j += 32) sum += a[j] * x[j];
    for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffff, sum, off);
    if (lane == 0) y[row] = sum;
}

extern "C" __global__ void gemv_t_thread_per_col(const float* __restrict__ A,
                                                 const float* __restrict__ y,
                                                 float* __restrict__ z, int m, int n)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    float sum = 0.0f;
    for (int i = 0; i < m; ++i) sum += A[(size_t)i * n + col] * y[i];
    z[col] = sum;
}
"""

M, N, BLOCK = 16384, 8192, 256


def main():
    args = parser(__doc__).parse_args()
    import cupy as cp

    mod = cp.RawModule(code=GEMV_SRC)
    k_row = mod.get_function("gemv_thread_per_row")
    k_warp = mod.get_function("gemv_warp_per_row")
    k_t = mod.get_function("gemv_t_thread_per_col")
    cp.random.seed(3)
    A = cp.random.standard_normal((M, N), dtype=cp.float32)
    x = cp.random.standard_normal(N, dtype=cp.float32)
    y1, y2, z = cp.empty(M, cp.float32), cp.empty(M, cp.float32), cp.empty(N, cp.float32)
    out = {}

    def step():
        k_row(((M + BLOCK - 1) // BLOCK,), (BLOCK,), (A, x, y1, cp.int32(M), cp.int32(N)))
        k_warp(((M * 32 + BLOCK - 1) // BLOCK,), (BLOCK,), (A, x, y2, cp.int32(M), cp.int32(N)))
        k_t(((N + BLOCK - 1) // BLOCK,), (BLOCK,), (A, y2, z, cp.int32(M), cp.int32(N)))
        out["y"] = A @ x
        out["z"] = A.T @ y2

    def check():
        ref = out["y"].get().astype(np.float64)
        for name, got in (("thread per row", y1), ("warp per row", y2)):
            err = np.abs(got.get() - ref).max() / max(np.abs(ref).max(), 1.0)
            if not err < 1e-3:
                raise AssertionError(f"{name}: relative error {err:.3g}")
        ref = out["z"].get().astype(np.float64)
        err = np.abs(z.get() - ref).max() / max(np.abs(ref).max(), 1.0)
        if not err < 1e-3:
            raise AssertionError(f"A^T y: relative error {err:.3g}")

    run(step, name="cuda_gemv", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
