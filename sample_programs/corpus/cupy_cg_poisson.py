"""A few conjugate-gradient iterations on the 2-D Poisson equation, written with CuPy arrays.

The 5-point Laplacian on a 2048 x 2048 grid (4M unknowns, about 21M non-zeros, float64) is a
``cupyx.scipy.sparse.csr_matrix``; each step solves A x = b from x = 0 for six iterations of
textbook CG: one sparse matrix-vector product (cuSPARSE), two dot products and the vector
updates as separate CuPy expressions, with the scalars kept on the device as 0-d arrays.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

G, ITERS = 2048, 6


def poisson_csr(n):
    """CSR arrays of the 5-point Laplacian on an n x n grid (Dirichlet boundary)."""
    k = np.arange(n * n, dtype=np.int64)
    i, j = k // n, k % n
    offs = np.array([-n, -1, 0, 1, n])                 # ascending, so each row comes sorted
    valid = np.stack([i > 0, j > 0, np.ones_like(i, bool), j < n - 1, i < n - 1], axis=1)
    cols = (k[:, None] + offs[None, :])[valid].astype(np.int32)
    vals = np.where(offs[None, :] == 0, 4.0, -1.0).repeat(n * n, axis=0)[valid]
    indptr = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int32)
    return vals, cols, indptr


def main():
    args = parser(__doc__).parse_args()
    import cupy as cp
    import cupyx.scipy.sparse as sp

    vals, cols, indptr = poisson_csr(G)
    n = G * G
    A = sp.csr_matrix((cp.asarray(vals), cp.asarray(cols), cp.asarray(indptr)), shape=(n, n))
    del vals, cols, indptr
    cp.random.seed(5)
    b = cp.random.standard_normal(n)
    x = cp.empty(n)
    r = cp.empty(n)
    out = {}

    def step():
        nonlocal x, r  # updated in place below (x += ...); without this they are locals
        x.fill(0)
        r[...] = b
        p = b.copy()
        rr = cp.dot(r, r)
        for _ in range(ITERS):
            Ap = A @ p
            alpha = rr / cp.dot(p, Ap)
            x += alpha * p
            r -= alpha * Ap
            rr_new = cp.dot(r, r)
            p = r + (rr_new / rr) * p
            rr = rr_new
        out["rr"] = rr

    def check():
        true_r = b - A @ x
        gap = float(cp.linalg.norm(true_r - r) / cp.linalg.norm(b))
        if not gap < 1e-8:
            raise AssertionError(f"recursive residual drifted from b - A x by {gap:.3g}")
        energy = float(0.5 * cp.dot(x, A @ x) - cp.dot(b, x))     # 0 at x = 0, CG lowers it
        if not energy < 0:
            raise AssertionError(f"energy functional {energy} did not decrease")
        if not abs(float(out["rr"]) - float(cp.dot(r, r))) <= 1e-10 * float(cp.dot(b, b)):
            raise AssertionError("stored r.r does not match r")

    run(step, name="cupy_cg_poisson", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
