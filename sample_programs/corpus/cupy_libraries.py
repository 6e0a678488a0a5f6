"""CuPy library calls: one step that goes through the vendor libraries behind CuPy.

cuBLAS (an odd-shaped SGEMM, a batch of 8192 32x32 products, a GEMV), cuSOLVER
(Cholesky of a 256x256 SPD matrix, a 512x512 linear solve), cuSPARSE (SpMV with a
random 1M-row CSR matrix, ~16 nonzeros a row), cuFFT (a 4096x4096 complex 2-D FFT and a
batched real FFT), cuRAND (2^25 normal floats) and CUB/Thrust (sort, argsort, cumsum,
nonzero, unique).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import cupy as cp
import cupyx.scipy.sparse as sparse

from common import parser, run

args = parser(__doc__).parse_args()

cp.random.seed(0)
f32 = cp.float32

# cuBLAS inputs: an odd-shaped product, a batch of small products, a matrix-vector product
A = cp.random.standard_normal((4097, 77), dtype=f32)
B = cp.random.standard_normal((77, 3001), dtype=f32)
Xb = cp.random.standard_normal((8192, 32, 32), dtype=f32)
Yb = cp.random.standard_normal((8192, 32, 32), dtype=f32)
M = cp.random.standard_normal((8192, 8192), dtype=f32)
v = cp.random.standard_normal(8192, dtype=f32)

# cuSOLVER inputs (float64): an SPD matrix for Cholesky, a well-conditioned system for solve.
# cp.linalg.cholesky goes through blocked potrf, about three launches per 32 columns.
G = cp.random.standard_normal((256, 256))
spd = G @ G.T / 256 + cp.eye(256)
del G
Asys = cp.random.standard_normal((512, 512)) + 64.0 * cp.eye(512)
bsys = cp.random.standard_normal(512)

# cuSPARSE input: 1M x 1M CSR with ~16 nonzeros a row at random positions
N_SP = 1 << 20
NNZ = 16 * N_SP
rows = cp.random.randint(0, N_SP, size=NNZ, dtype=cp.int32)
cols = cp.random.randint(0, N_SP, size=NNZ, dtype=cp.int32)
vals = cp.random.random_sample(NNZ, dtype=f32)
S = sparse.coo_matrix((vals, (rows, cols)), shape=(N_SP, N_SP)).tocsr()
S.sum_duplicates()
del rows, cols, vals
xs = cp.random.standard_normal(N_SP, dtype=f32)

# cuFFT inputs: a 4096x4096 complex image, 1024 real signals of 8192 samples
img = (cp.random.standard_normal((4096, 4096), dtype=f32)
       + 1j * cp.random.standard_normal((4096, 4096), dtype=f32)).astype(cp.complex64)
sig = cp.random.standard_normal((1024, 8192), dtype=f32)

# CUB/Thrust inputs
keys = cp.random.random_sample(1 << 25, dtype=f32)     # sort and cumsum
akeys = cp.random.random_sample(1 << 22, dtype=f32)    # argsort
mask = cp.random.random_sample(1 << 25, dtype=f32) < 0.1  # ~10% set
labels = cp.random.randint(0, 100, size=1 << 22, dtype=cp.int32)  # 100 distinct values

cp.cuda.Device().synchronize()
cp.get_default_memory_pool().free_all_blocks()  # give back the setup temporaries
out = {}


def step():
    out["gemm"] = A @ B                       # cuBLAS SGEMM, 4097x3001x77
    out["bgemm"] = cp.matmul(Xb, Yb)           # strided-batched SGEMM, 8192 x (32x32x32)
    out["gemv"] = M @ v                        # SGEMV 8192x8192
    out["chol"] = cp.linalg.cholesky(spd)      # potrf, lower factor
    out["solve"] = cp.linalg.solve(Asys, bsys)  # getrf + getrs
    out["spmv"] = S @ xs                       # cusparseSpMV
    out["fft2"] = cp.fft.fft2(img)             # 2-D C2C
    out["rfft"] = cp.fft.rfft(sig, axis=-1)    # batched R2C along rows
    out["normal"] = cp.random.standard_normal(1 << 25, dtype=f32)  # cuRAND normal
    out["sort"] = cp.sort(keys)                # radix sort of 2^25 floats
    out["argsort"] = cp.argsort(akeys)         # key/index sort of 2^22 floats
    out["cumsum"] = cp.cumsum(keys)            # inclusive scan of 2^25 floats
    out["nonzero"] = cp.nonzero(mask)[0]       # stream compaction (syncs for the count)
    out["unique"] = cp.unique(labels)          # sort + adjacent-difference + compaction


def close(got, ref, tol, what):
    err = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)
    if not err < tol:
        raise AssertionError(f"{what}: relative error {err:.3g} exceeds {tol:g}")


def check():
    close(out["gemm"][:64].get(), A[:64].get().astype(np.float64) @ B.get(), 1e-4, "gemm")
    close(out["bgemm"][:16].get(),
          np.matmul(Xb[:16].get().astype(np.float64), Yb[:16].get()), 1e-4, "batched gemm")
    close(out["gemv"][:64].get(), M[:64].get().astype(np.float64) @ v.get(), 1e-4, "gemv")

    L = out["chol"].get()
    if np.any(np.triu(L, 1) != 0):
        raise AssertionError("cholesky: factor is not lower triangular")
    close(L @ L.T, spd.get(), 1e-10, "cholesky")
    close(Asys.get() @ out["solve"].get(), bsys.get(), 1e-10, "solve")

    # SpMV on the first 4096 rows, recomputed on the host from the CSR arrays
    indptr = S.indptr[:4097].get()
    idx = S.indices[:indptr[-1]].get()
    dat = S.data[:indptr[-1]].get().astype(np.float64)
    row_of = np.repeat(np.arange(4096), np.diff(indptr))
    ref = np.bincount(row_of, weights=dat * xs.get()[idx], minlength=4096)
    close(out["spmv"][:4096].get(), ref, 1e-4, "spmv")

    close(out["fft2"][:, :8].get(), np.fft.fft2(img.get())[:, :8], 1e-4, "fft2")
    close(out["rfft"][:16].get(), np.fft.rfft(sig[:16].get(), axis=-1), 1e-4, "rfft")

    z = out["normal"]
    if not (abs(float(z.mean())) < 1e-3 and abs(float(z.std()) - 1) < 1e-3):
        raise AssertionError("standard_normal: moments off")

    if not np.array_equal(out["sort"].get(), np.sort(keys.get())):
        raise AssertionError("sort mismatch")
    ak = akeys.get()
    perm = out["argsort"].get()
    if not (np.array_equal(ak[perm], np.sort(ak))
            and np.array_equal(np.sort(perm), np.arange(ak.size))):
        raise AssertionError("argsort mismatch")
    ref = np.cumsum(keys.get().astype(np.float64))
    close(out["cumsum"][::4099].get(), ref[::4099], 1e-4, "cumsum")
    if not np.array_equal(out["nonzero"].get(), np.nonzero(mask.get())[0]):
        raise AssertionError("nonzero mismatch")
    if not np.array_equal(out["unique"].get(), np.unique(labels.get())):
        raise AssertionError("unique mismatch")


run(step, name="cupy_libraries", backend="cupy", args=args, check=check)
