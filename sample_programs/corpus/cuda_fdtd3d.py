"""3-D FDTD (Yee scheme) time stepping of Maxwell's equations in a CuPy RawModule.

A 384 x 320 x 256 cell box (31.5M cells, float32, the six field components in six arrays of
126 MB, x fastest) holding a dielectric sphere (eps_r 4) on a lossy ground slab (eps_r 6,
conductivity 0.02 in normalised units), PEC walls, driven by a soft Gaussian-modulated Ez
dipole, in normalised units with Courant number 0.5. The material of every cell is a uint8
index into ``__constant__`` update coefficients (``ca``, ``cb``), as a general FDTD code
stores it.

One step advances the fields by four time steps; each time step is two launches: the H
update (reads the three E and three H components, writes H) and the E update (reads the six
components and the material byte, writes E, adds the source term at the dipole cell). One
thread per cell, 32 x 8 thread blocks over a 12 x 40 x 256 grid, unit-stride loads along x;
the neighbours at j - 1 / j + 1 and k - 1 / k + 1 are rows and planes the neighbouring
blocks have just read, served from L1 and L2, so DRAM sees about 36-40 bytes per cell per
launch (9 float arrays and the material byte). The source amplitude of each time step is a
host scalar passed as an argument.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

NX, NY, NZ = 384, 320, 256
STEPS_PER_CALL = 4
COURANT = 0.5
BX, BY = 32, 8
# (eps_r, conductivity in normalised units) of vacuum, the sphere, the ground slab
MATERIALS = ((1.0, 0.0), (4.0, 0.0), (6.0, 0.02))
T0, SPREAD, OMEGA = 30.0, 10.0, 2 * math.pi / 16.0

FDTD_SRC = r"""
__constant__ float c_ca[4];
__constant__ float c_cb[4];

#define IDX(i, j, k) (((size_t)(k) * ny + (j)) * nx + (i))

// H^{n+1/2} from E^n; H on the last index of any direction stays zero
extern "C" __global__ void __launch_bounds__(256)
update_h(const float* __restrict__ ex, const float* __restrict__ ey,
         const float* __restrict__ ez, float* __restrict__ hx, float* __restrict__ hy,
         float* __restrict__ hz, int nx, int ny, int nz, float ch)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int k = blockIdx.z;
    if (i >= nx - 1 || j >= ny - 1 || k >= nz - 1) return;
    const size_t c = IDX(i, j, k);
    const size_t sx = 1, sy = nx, sz = (size_t)nx * ny;
    const float exc = ex[c], eyc = ey[c], ezc = ez[c];
    hx[c] -= ch * ((ez[c + sy] - ezc) - (ey[c + sz] - eyc));
    hy[c] -= ch * ((ex[c + sz] - exc) - (ez[c + sx] - ezc));
    hz[c] -= ch * ((ey[c + sx] - eyc) - (ex[c + sy] - exc));
}

// E^{n+1} from E^n and H^{n+1/2}; E on index 0 of any direction stays zero (PEC walls)
extern "C" __global__ void __launch_bounds__(256)
update_e(float* __restrict__ ex, float* __restrict__ ey, float* __restrict__ ez,
         const float* __restrict__ hx, const float* __restrict__ hy,
         const float* __restrict__ hz, const unsigned char* __restrict__ mat,
         int nx, int ny, int nz, size_t src_cell, float src)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int k = blockIdx.z;
    if (i == 0 || j == 0 || k == 0 || i >= nx || j >= ny) return;
    const size_t c = IDX(i, j, k);
    const size_t sx = 1, sy = nx, sz = (size_t)nx * ny;
    const int m = mat[c];
    const float ca = c_ca[m], cb = c_cb[m];
    const float hxc = hx[c], hyc = hy[c], hzc = hz[c];
    ex[c] = ca * ex[c] + cb * ((hzc - hz[c - sy]) - (hyc - hy[c - sz]));
    ey[c] = ca * ey[c] + cb * ((hxc - hx[c - sz]) - (hzc - hz[c - sx]));
    float e = ca * ez[c] + cb * ((hyc - hy[c - sx]) - (hxc - hx[c - sy]));
    if (c == src_cell) e += src;
    ez[c] = e;
}
"""


def coefficients():
    """ca, cb per material for the lossy update (normalised units, dt = COURANT)."""
    ca, cb = np.zeros(4, np.float32), np.zeros(4, np.float32)
    for m, (eps, sigma) in enumerate(MATERIALS):
        loss = sigma * COURANT / (2.0 * eps)
        ca[m] = (1.0 - loss) / (1.0 + loss)
        cb[m] = COURANT / eps / (1.0 + loss)
    return ca, cb


def make_materials(nx, ny, nz):
    """uint8 [nz, ny, nx]: a ground slab in the lowest 15 % of k and a sphere above it."""
    k, j, i = np.ogrid[0:nz, 0:ny, 0:nx]
    mat = np.zeros((nz, ny, nx), np.uint8)
    mat[:max(2, int(0.15 * nz))] = 2
    r = 0.18 * min(nx, ny, nz)
    sphere = ((i - 0.62 * nx) ** 2 + (j - 0.5 * ny) ** 2 + (k - 0.45 * nz) ** 2) < r * r
    mat[sphere] = 1
    return mat


def source(n):
    return np.float32(math.exp(-((n - T0) / SPREAD) ** 2) * math.sin(OMEGA * n))


def source_cell(nx, ny, nz):
    return (int(0.35 * nz) * ny + ny // 2) * nx + int(0.3 * nx)


def host_fdtd(mat, steps, nx, ny, nz):
    """NumPy float32 reference of ``steps`` time steps from zero fields; [k, j, i] arrays."""
    ca_t, cb_t = coefficients()
    ca, cb = ca_t[mat], cb_t[mat]
    f = {n: np.zeros((nz, ny, nx), np.float32) for n in ("ex", "ey", "ez", "hx", "hy", "hz")}
    ex, ey, ez, hx, hy, hz = (f[n] for n in ("ex", "ey", "ez", "hx", "hy", "hz"))
    ch = np.float32(COURANT)
    sk, rem = divmod(source_cell(nx, ny, nz), nx * ny)
    sj, si = divmod(rem, nx)
    s = np.s_[:-1, :-1, :-1]
    for n in range(steps):
        hx[s] -= ch * ((ez[:-1, 1:, :-1] - ez[s]) - (ey[1:, :-1, :-1] - ey[s]))
        hy[s] -= ch * ((ex[1:, :-1, :-1] - ex[s]) - (ez[:-1, :-1, 1:] - ez[s]))
        hz[s] -= ch * ((ey[:-1, :-1, 1:] - ey[s]) - (ex[:-1, 1:, :-1] - ex[s]))
        t = np.s_[1:, 1:, 1:]
        a, b = ca[t], cb[t]
        ex[t] = a * ex[t] + b * ((hz[t] - hz[1:, :-1, 1:]) - (hy[t] - hy[:-1, 1:, 1:]))
        ey[t] = a * ey[t] + b * ((hx[t] - hx[:-1, 1:, 1:]) - (hz[t] - hz[1:, 1:, :-1]))
        ez[t] = a * ez[t] + b * ((hy[t] - hy[1:, 1:, :-1]) - (hx[t] - hx[1:, :-1, 1:]))
        ez[sk, sj, si] += source(n)
    return f


def main():
    p = parser(__doc__)
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=FDTD_SRC, options=("-std=c++17",))
    update_h = mod.get_function("update_h")
    update_e = mod.get_function("update_e")
    ca, cb = coefficients()
    cp.ndarray((4,), cp.float32, mod.get_global("c_ca"))[...] = cp.asarray(ca)
    cp.ndarray((4,), cp.float32, mod.get_global("c_cb"))[...] = cp.asarray(cb)

    class Grid:
        def __init__(self, nx, ny, nz):
            self.shape = (nx, ny, nz)
            self.fields = [cp.zeros((nz, ny, nx), cp.float32) for _ in range(6)]
            self.mat = cp.asarray(make_materials(nx, ny, nz))
            self.src_cell = np.uint64(source_cell(nx, ny, nz))
            self.blocks = ((nx + BX - 1) // BX, (ny + BY - 1) // BY, nz)
            self.n = 0

        def advance(self, steps):
            nx, ny, nz = (np.int32(v) for v in self.shape)
            ex, ey, ez, hx, hy, hz = self.fields
            for _ in range(steps):
                update_h(self.blocks, (BX, BY), (ex, ey, ez, hx, hy, hz, nx, ny, nz,
                                                 np.float32(COURANT)))
                update_e(self.blocks, (BX, BY), (ex, ey, ez, hx, hy, hz, self.mat, nx, ny, nz,
                                                 self.src_cell, source(self.n)))
                self.n += 1

    box = Grid(NX, NY, NZ)

    def step():
        box.advance(STEPS_PER_CALL)

    def check():
        # the same kernels on a small box with odd sizes against the NumPy reference
        small = Grid(45, 38, 30)
        small.advance(70)
        want = host_fdtd(make_materials(45, 38, 30), 70, 45, 38, 30)
        for name, got in zip(("ex", "ey", "ez", "hx", "hy", "hz"), small.fields):
            g, w = cp.asnumpy(got), want[name]
            scale = np.abs(w).max()
            if not (scale > 0 and np.abs(g - w).max() < 3e-4 * scale):
                raise AssertionError(f"small box {name}: max error {np.abs(g - w).max():.3g} "
                                     f"(max |field| {scale:.3g})")
        energy = sum(float((f.astype(cp.float64) ** 2).sum()) for f in box.fields)
        if not (math.isfinite(energy) and energy > 0):
            raise AssertionError(f"field energy {energy} after the warm-up steps")

    run(step, name="cuda_fdtd3d", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
