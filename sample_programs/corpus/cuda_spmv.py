"""Sparse matrix-vector products y = A x in CSR, in CuPy raw kernels and through cuSPARSE.

Two matrices: a 2^19-row matrix whose row lengths follow a power law (most rows a few
nonzeros, a few rows thousands, as in a web or social graph), and the 5-point Laplacian of a
1024 x 1024 grid. Each is multiplied with a kernel that gives one thread to each row and one
that gives one warp to each row; the power-law matrix also goes through
``cupyx.scipy.sparse`` (cuSPARSE SpMV), and the step ends with the dot product y . x used as
the Rayleigh quotient numerator. float32 values, int32 indices.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

SPMV_SRC = r"""
// One thread per row.
extern "C" __global__ void spmv_csr_scalar(const int* __restrict__ indptr,
                                           const int* __restrict__ indices,
                                           const float* __restrict__ data,
                                           const float* __restrict__ x,
                                           float* __restrict__ y, int n_rows)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n_rows) {
        float sum = 0.0f;
        int start = indptr[row];
        int end = indptr[row + 1];
        for (int j = start; j < end; ++j) {
            sum += data[j] * x[indices[j]];
        }
        y[row] = sum;
    }
}

// One warp per row: lanes stride over the row's nonzeros, then a shuffle reduction.
extern "C" __global__ void spmv_csr_vector(const int* __restrict__ indptr,
                                           const int* __restrict__ indices,
                                           const float* __restrict__ data,
                                           const float* __restrict__ x,
                                           float* __restrict__ y, int n_rows)
{
    int warp_id = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp_id >= n_rows) return;
    int start = indptr[warp_id];
    int end = indptr[warp_id + 1];
    float sum = 0.0f;
    for (int j = start + lane; j < end; j += 32) {
        sum += data[j] * x[indices[j]];
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(0xffffffff, sum, offset);
    }
    if (lane == 0) y[warp_id] = sum;
}
"""

N_PL = 1 << 19          # rows (and columns) of the power-law matrix
GRID = 1024             # the Laplacian is of a GRID x GRID mesh
BLOCK = 256


def power_law_lengths(rng, n):
    """Row lengths from a Pareto tail: median ~3, mean ~20, capped at 16384."""
    lengths = np.floor(rng.pareto(1.3, n) * 4.0).astype(np.int64) + 1
    return np.minimum(lengths, 16384)


def laplacian_csr(g):
    """CSR arrays of the 5-point Laplacian on a g x g grid (Dirichlet boundary)."""
    n = g * g
    node = np.arange(n)
    i, j = np.divmod(node, g)
    rows, cols, vals = [node], [node], [np.full(n, 4.0, np.float32)]
    for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        ni, nj = i + di, j + dj
        inside = (ni >= 0) & (ni < g) & (nj >= 0) & (nj < g)
        rows.append(node[inside])
        cols.append((ni * g + nj)[inside])
        vals.append(np.full(int(inside.sum()), -1.0, np.float32))
    rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    order = np.lexsort((cols, rows))
    indptr = np.zeros(n + 1, np.int64)
    indptr[1:] = np.cumsum(np.bincount(rows, minlength=n))
    return indptr.astype(np.int32), cols[order].astype(np.int32), vals[order]


def host_spmv(indptr, indices, data, x):
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return np.bincount(rows, weights=data.astype(np.float64) * x[indices],
                       minlength=indptr.size - 1)



def main():
    args = parser(__doc__).parse_args()

    import cupy as cp
    import cupyx.scipy.sparse as sparse

    rng = np.random.default_rng(7)
    mod = cp.RawModule(code=SPMV_SRC)
    spmv_scalar = mod.get_function("spmv_csr_scalar")
    spmv_vector = mod.get_function("spmv_csr_vector")

    # Power-law matrix: built on the device, canonicalised (sorted, no duplicates) by cupyx
    lengths = power_law_lengths(rng, N_PL)
    indptr = np.zeros(N_PL + 1, np.int64)
    indptr[1:] = np.cumsum(lengths)
    nnz = int(indptr[-1])
    cp.random.seed(7)
    indices = cp.random.randint(0, N_PL, size=nnz, dtype=cp.int32)
    data = cp.random.random_sample(nnz, dtype=cp.float32) - 0.5
    A = sparse.csr_matrix((data, indices, cp.asarray(indptr, dtype=cp.int32)),
                          shape=(N_PL, N_PL))
    A.sum_duplicates()
    del indices, data
    pl_indptr = A.indptr.astype(cp.int32, copy=False)
    pl_indices = A.indices.astype(cp.int32, copy=False)
    pl_data = A.data.astype(cp.float32, copy=False)
    x_pl = cp.random.standard_normal(N_PL, dtype=cp.float32)
    y_pl_scalar = cp.empty(N_PL, cp.float32)
    y_pl_vector = cp.empty(N_PL, cp.float32)

    # Laplacian
    lp_indptr, lp_indices, lp_data = laplacian_csr(GRID)
    n_lp = GRID * GRID
    L_indptr = cp.asarray(lp_indptr)
    L_indices = cp.asarray(lp_indices)
    L_data = cp.asarray(lp_data)
    x_lp = cp.asarray(rng.standard_normal(n_lp).astype(np.float32))
    y_lp_scalar = cp.empty(n_lp, cp.float32)
    y_lp_vector = cp.empty(n_lp, cp.float32)
    cp.cuda.Device().synchronize()
    cp.get_default_memory_pool().free_all_blocks()

    out = {}

    def scalar(ip, ix, d, x, y, n):
        spmv_scalar(((n + BLOCK - 1) // BLOCK,), (BLOCK,), (ip, ix, d, x, y, cp.int32(n)))

    def vector(ip, ix, d, x, y, n):
        spmv_vector(((n * 32 + BLOCK - 1) // BLOCK,), (BLOCK,), (ip, ix, d, x, y, cp.int32(n)))

    def step():
        scalar(pl_indptr, pl_indices, pl_data, x_pl, y_pl_scalar, N_PL)
        vector(pl_indptr, pl_indices, pl_data, x_pl, y_pl_vector, N_PL)
        out["cusparse"] = A @ x_pl
        scalar(L_indptr, L_indices, L_data, x_lp, y_lp_scalar, n_lp)
        vector(L_indptr, L_indices, L_data, x_lp, y_lp_vector, n_lp)
        out["rq"] = cp.dot(y_lp_vector, x_lp)

    def check():
        ref = host_spmv(pl_indptr.get(), pl_indices.get(), pl_data.get(), x_pl.get())
        scale = max(np.abs(ref).max(), 1.0)
        for name, got in (("spmv_csr_scalar (power law)", y_pl_scalar),
                          ("spmv_csr_vector (power law)", y_pl_vector),
                          ("cuSPARSE SpMV", out["cusparse"])):
            err = np.abs(got.get() - ref).max() / scale
            if not err < 1e-4:
                raise AssertionError(f"{name}: relative error {err:.3g}")
        ref = host_spmv(lp_indptr, lp_indices, lp_data, x_lp.get())
        for name, got in (("spmv_csr_scalar (laplacian)", y_lp_scalar),
                          ("spmv_csr_vector (laplacian)", y_lp_vector)):
            err = np.abs(got.get() - ref).max()
            if not err < 1e-4:
                raise AssertionError(f"{name}: max error {err:.3g}")
        rq = float(np.dot(ref, x_lp.get().astype(np.float64)))
        if abs(float(out["rq"]) - rq) > 1e-3 * abs(rq):
            raise AssertionError(f"dot: {float(out['rq'])} vs {rq}")
        print(f"power-law matrix: {A.nnz} nonzeros, longest row "
              f"{int(cp.diff(A.indptr).max())}", file=sys.stderr)

    run(step, name="cuda_spmv", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
