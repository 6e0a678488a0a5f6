"""Implicit 3-D heat diffusion by dimensional splitting, with a batched Thomas solver in CuPy.

A 256^3 float32 temperature field (a few hot Gaussian blobs, zero Dirichlet boundary
outside the grid) is advanced by locally one-dimensional (LOD) backward-Euler steps: each
time step solves (1 + 2r) u_i - r (u_(i-1) + u_(i+1)) = d_i along every grid line in x,
then in y, then in z, with r = kappa dt / h^2 = 1. One step of the program is 8 time steps
(24 tridiagonal solves) and a ``cupy.sum`` of the field (the heat left).

The solver (``cupy.RawModule``, 128 threads a block) is the textbook batched Thomas
algorithm, one thread per line: the coefficients are the same on every line, so the
forward-elimination factors 1 / (b - a c'_(k-1)) and the back-substitution factors are
computed once on the host and kept in ``__constant__`` memory; the forward sweep writes d'
into the output array and the backward sweep overwrites it with the solution. One kernel
serves the three directions through strides (first point of the line, distance between
its points); the field is stored x-fastest ([z][y][x]), so in the x direction a thread's
points are consecutive while neighbouring threads are 256 floats apart, and in y and z
neighbouring threads take neighbouring x.

``--transpose`` runs the x solve on a copy transposed in each z slab ([z][x][y], a 32 x 32
shared-memory tile transpose with a padded row), so that direction is solved with
neighbouring threads on neighbouring points too, and transposes the result back.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

NX = NY = NZ = 256
R = 1.0
TIME_STEPS = 8
THREADS = 128

ADI_SRC = r"""
#define MAX_N 512
#define TILE 32
#define TILE_ROWS 8

__constant__ float fwd_factor[MAX_N];     // 1 / (b - a c'_(k-1))
__constant__ float back_factor[MAX_N];    // -c'_k = r * fwd_factor[k]

// (1 + 2r) u_k - r (u_(k-1) + u_(k+1)) = d_k on each of n_lines lines of n points; line l
// starts at (l % inner) * s_inner + (l / inner) * s_outer and its points are s_elem apart.
extern "C" __global__ void thomas_lines(const float* __restrict__ d, float* __restrict__ u,
                                        int n_lines, int inner, int s_inner, int s_outer,
                                        int s_elem, int n, float r)
{
    int line = blockIdx.x * blockDim.x + threadIdx.x;
    if (line >= n_lines) return;
    int base = (line % inner) * s_inner + (line / inner) * s_outer;

    float prev = d[base] * fwd_factor[0];
    u[base] = prev;
    for (int k = 1; k < n; ++k) {
        int p = base + k * s_elem;
        prev = (d[p] + r * prev) * fwd_factor[k];
        u[p] = prev;
    }
    for (int k = n - 2; k >= 0; --k) {
        int p = base + k * s_elem;
        prev = u[p] + back_factor[k] * prev;
        u[p] = prev;
    }
}

// out[z][x][y] = in[z][y][x] for slabs of ny x nx; blocks of TILE x TILE_ROWS threads
extern "C" __global__ void transpose_xy(const float* __restrict__ in, float* __restrict__ out,
                                        int nx, int ny)
{
    __shared__ float tile[TILE][TILE + 1];
    size_t slab = (size_t)blockIdx.z * nx * ny;
    int x = blockIdx.x * TILE + threadIdx.x;
    int y0 = blockIdx.y * TILE;
    for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
        int y = y0 + j;
        if (x < nx && y < ny) tile[j][threadIdx.x] = in[slab + (size_t)y * nx + x];
    }
    __syncthreads();
    int yo = y0 + threadIdx.x;
    int x0 = blockIdx.x * TILE;
    for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
        int xo = x0 + j;
        if (xo < nx && yo < ny) out[slab + (size_t)xo * ny + yo] = tile[threadIdx.x][j];
    }
}
"""


def thomas_factors(n, r):
    """Forward and backward factors of the constant-coefficient Thomas algorithm."""
    a = c = -r
    b = 1.0 + 2.0 * r
    fwd = np.empty(n)
    back = np.empty(n)
    c_prev = 0.0
    for k in range(n):
        fwd[k] = 1.0 / (b - a * c_prev)
        c_prev = c * fwd[k]
        back[k] = -c_prev
    return fwd.astype(np.float32), back.astype(np.float32)


def initial_field():
    z, y, x = np.meshgrid(*(np.linspace(0.0, 1.0, n) for n in (NZ, NY, NX)), indexing="ij")
    u = np.zeros((NZ, NY, NX))
    for cx, cy, cz, w, amp in ((0.3, 0.4, 0.5, 0.08, 1.0), (0.7, 0.6, 0.4, 0.05, 2.0),
                               (0.5, 0.2, 0.7, 0.12, 0.5)):
        u += amp * np.exp(-((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2) / (2 * w * w))
    return u.astype(np.float32)


def host_lod_step(u):
    """One LOD time step in float64 with SciPy's banded solver."""
    from scipy.linalg import solve_banded

    def solve_axis(v, axis):
        n = v.shape[axis]
        ab = np.zeros((3, n))
        ab[0, 1:] = -R
        ab[1, :] = 1.0 + 2.0 * R
        ab[2, :-1] = -R
        w = np.moveaxis(v, axis, 0)
        return np.moveaxis(solve_banded((1, 1), ab, w.reshape(n, -1)).reshape(w.shape), 0, axis)

    for axis in (2, 1, 0):                                   # x, y, z
        u = solve_axis(u, axis)
    return u


def main():
    p = parser(__doc__)
    p.add_argument("--transpose", action="store_true",
                   help="solve the x direction on a slab-transposed copy")
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=ADI_SRC)
    thomas = mod.get_function("thomas_lines")
    transpose = mod.get_function("transpose_xy")
    fwd, back = thomas_factors(max(NX, NY, NZ), R)
    for name, host in (("fwd_factor", fwd), ("back_factor", back)):
        cp.ndarray(host.shape, cp.float32, mod.get_global(name)).set(host)

    u0 = initial_field()
    u = cp.asarray(u0)
    v = cp.empty_like(u)
    t1 = cp.empty_like(u)
    t2 = cp.empty_like(u)
    r = np.float32(R)
    i32 = np.int32

    def solve(src, dst, inner, s_inner, s_outer, s_elem, n, n_lines):
        blocks = (n_lines + THREADS - 1) // THREADS
        thomas((blocks,), (THREADS,), (src, dst, i32(n_lines), i32(inner), i32(s_inner),
                                       i32(s_outer), i32(s_elem), i32(n), r))

    def lod_step(a, b):
        """One time step of the field in a; returns b, which holds the result (a is reused)."""
        if args.transpose:
            grid = ((NX + 31) // 32, (NY + 31) // 32, NZ)
            transpose(grid, (32, 8), (a, t1, i32(NX), i32(NY)))           # [z][x][y]
            solve(t1, t2, NY, 1, NX * NY, NY, NX, NY * NZ)                 # along x
            grid = ((NY + 31) // 32, (NX + 31) // 32, NZ)
            transpose(grid, (32, 8), (t2, b, i32(NY), i32(NX)))           # back to [z][y][x]
        else:
            solve(a, b, NY, NX, NX * NY, 1, NX, NY * NZ)                   # along x
        solve(b, a, NX, 1, NX * NY, NX, NY, NX * NZ)                       # along y
        solve(a, b, NX, 1, NX, NX * NY, NZ, NX * NY)                       # along z
        return b

    out = {}

    def step():
        nonlocal u, v
        for _ in range(TIME_STEPS):
            new = lod_step(u, v)
            u, v = new, u
        out["heat"] = cp.sum(u)

    def check():
        start = cp.asnumpy(u).astype(np.float64)
        a, b = u.copy(), cp.empty_like(u)
        got = cp.asnumpy(lod_step(a, b)).astype(np.float64)
        want = host_lod_step(start)
        err = np.abs(got - want).max() / np.abs(want).max()
        if not err < 1e-4:
            raise AssertionError(f"one LOD step differs from SciPy's banded solver by {err:.3g}")
        # zero boundary values: heat can only leave; the peaks spread out
        heat0 = float(u0.astype(np.float64).sum())
        heat = float(out["heat"])
        if not 0.5 * heat0 < heat <= heat0 * (1.0 + 1e-4):
            raise AssertionError(f"heat {heat}, initially {heat0}")
        if not start.max() < u0.max():
            raise AssertionError(f"peak {start.max()} has not dropped from {u0.max()}")

    run(step, name="cuda_adi_heat3d", backend="cupy", args=args,
        variant="transpose" if args.transpose else "baseline", check=check)


if __name__ == "__main__":
    main()
