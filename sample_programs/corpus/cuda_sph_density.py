"""SPH fluid density and pressure with a uniform-grid cell list, in a CuPy RawModule.

The density pass of a weakly compressible SPH solver (dam break, water): 1.97M particles
(a 160 x 96 x 128 block of spacing dx = 1 cm, jittered, with a sloshing free surface) in a
2.4 x 1.6 x 1.28 m tank, smoothing length h = 2 dx (about 33 neighbours inside h, 8
particles per cell). The particle arrays (float4 x, y, z, mass) are in emission order, which
after some simulated time has nothing to do with where the particles are: here a random
permutation of the lattice.

One step, rebuilt from scratch as the solver does every time step:

- a kernel that computes each particle's cell (cell size h, 120 x 80 x 64 cells, linear
  index with z fastest);
- ``cupy.argsort`` of the 1.97M cell indices (Thrust/CUB radix sort) and a gather of the
  sorted cell indices;
- two memsets and a kernel that marks where every cell's run starts and ends in the sorted
  order;
- the density kernel: one thread per particle, a loop over the 27 cells around it and over
  each cell's run of the sorted order, the poly6 kernel ``m (h^2 - r^2)^3`` summed over the
  neighbours inside h (the particle itself included), then the Tait equation of state for the
  pressure.

The density kernel walks the particles in their array order and reads every candidate
neighbour through the sort permutation (``pos[order[k]]``): the threads of a warp belong to
unrelated parts of the tank, and the 216 candidate positions each thread reads are scattered
over the 31 MB position array. ``--reorder`` adds one gather kernel that copies the positions
into cell order after the sort and runs the density kernel over the sorted particles
(neighbouring threads share cells, candidate reads are contiguous runs), scattering density
and pressure back to the particles' own slots; the results are the same.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

DX = 0.01
H = 2 * DX
FLUID = (160, 96, 128)                    # particles along x, y (up), z
CELLS = (120, 80, 64)                     # tank 2.4 x 1.6 x 1.28 m in cells of h
RHO0, C0, GAMMA = 1000.0, 20.0, 7.0
MASS = RHO0 * DX ** 3
N = FLUID[0] * FLUID[1] * FLUID[2]
BLOCK = 256

SPH_SRC = r"""
#define NCX 120
#define NCY 80
#define NCZ 64

__device__ __forceinline__ int3 cell_of(float4 p, float inv_h)
{
    int3 c;
    c.x = min(max(__float2int_rd(p.x * inv_h), 0), NCX - 1);
    c.y = min(max(__float2int_rd(p.y * inv_h), 0), NCY - 1);
    c.z = min(max(__float2int_rd(p.z * inv_h), 0), NCZ - 1);
    return c;
}

extern "C" __global__ void __launch_bounds__(256)
cell_index(const float4* __restrict__ pos, int n, float inv_h, int* __restrict__ cell)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int3 c = cell_of(pos[i], inv_h);
    cell[i] = (c.x * NCY + c.y) * NCZ + c.z;
}

// start (first sorted slot) and end (one past the last) of every non-empty cell's run;
// both arrays zeroed before, so empty cells have start == end == 0
extern "C" __global__ void __launch_bounds__(256)
cell_bounds(const int* __restrict__ sorted_cell, int n, int* __restrict__ cell_start,
            int* __restrict__ cell_end)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = sorted_cell[i];
    if (i == 0 || sorted_cell[i - 1] != c) cell_start[c] = i;
    if (i == n - 1 || sorted_cell[i + 1] != c) cell_end[c] = i + 1;
}

extern "C" __global__ void __launch_bounds__(256)
reorder_particles(const float4* __restrict__ pos, const long long* __restrict__ order, int n,
                  float4* __restrict__ sorted_pos)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    sorted_pos[k] = pos[order[k]];
}

struct SphParams {
    float inv_h, h2, poly6, rho0, b_tait;
};

__device__ __forceinline__ float tait(float rho, const SphParams& sp)
{
    const float r = rho / sp.rho0;
    const float r2 = r * r, r4 = r2 * r2;
    return sp.b_tait * (r4 * r2 * r - 1.0f);
}

// density and pressure of every particle, in the particles' own order; neighbours read
// through the sort permutation
extern "C" __global__ void __launch_bounds__(256)
sph_density(const float4* __restrict__ pos, const long long* __restrict__ order,
            const int* __restrict__ cell_start, const int* __restrict__ cell_end, int n,
            float inv_h, float h2, float poly6, float rho0, float b_tait,
            float* __restrict__ rho_out, float* __restrict__ p_out)
{
    const SphParams sp{inv_h, h2, poly6, rho0, b_tait};
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float4 pi = pos[i];
    const int3 c = cell_of(pi, sp.inv_h);
    float rho = 0.0f;
    for (int cx = max(c.x - 1, 0); cx <= min(c.x + 1, NCX - 1); ++cx)
        for (int cy = max(c.y - 1, 0); cy <= min(c.y + 1, NCY - 1); ++cy)
            for (int cz = max(c.z - 1, 0); cz <= min(c.z + 1, NCZ - 1); ++cz) {
                const int cell = (cx * NCY + cy) * NCZ + cz;
                const int end = cell_end[cell];
                for (int k = cell_start[cell]; k < end; ++k) {
                    const float4 pj = pos[order[k]];
                    const float dx = pi.x - pj.x, dy = pi.y - pj.y, dz = pi.z - pj.z;
                    const float q = sp.h2 - (dx * dx + dy * dy + dz * dz);
                    if (q > 0.0f) rho += pj.w * q * q * q;
                }
            }
    rho *= sp.poly6;
    rho_out[i] = rho;
    p_out[i] = tait(rho, sp);
}

// the same over the particles in cell order, positions already gathered into that order;
// results scattered back to the particles' own slots
extern "C" __global__ void __launch_bounds__(256)
sph_density_sorted(const float4* __restrict__ sorted_pos, const long long* __restrict__ order,
                   const int* __restrict__ cell_start, const int* __restrict__ cell_end, int n,
                   float inv_h, float h2, float poly6, float rho0, float b_tait,
                   float* __restrict__ rho_out, float* __restrict__ p_out)
{
    const SphParams sp{inv_h, h2, poly6, rho0, b_tait};
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    const float4 pi = sorted_pos[s];
    const int3 c = cell_of(pi, sp.inv_h);
    float rho = 0.0f;
    for (int cx = max(c.x - 1, 0); cx <= min(c.x + 1, NCX - 1); ++cx)
        for (int cy = max(c.y - 1, 0); cy <= min(c.y + 1, NCY - 1); ++cy)
            for (int cz = max(c.z - 1, 0); cz <= min(c.z + 1, NCZ - 1); ++cz) {
                const int cell = (cx * NCY + cy) * NCZ + cz;
                const int end = cell_end[cell];
                for (int k = cell_start[cell]; k < end; ++k) {
                    const float4 pj = sorted_pos[k];
                    const float dx = pi.x - pj.x, dy = pi.y - pj.y, dz = pi.z - pj.z;
                    const float q = sp.h2 - (dx * dx + dy * dy + dz * dz);
                    if (q > 0.0f) rho += pj.w * q * q * q;
                }
            }
    rho *= sp.poly6;
    const long long i = order[s];
    rho_out[i] = rho;
    p_out[i] = tait(rho, sp);
}
"""


def make_particles(gen):
    """[N, 4] float32 (x, y, z, mass) in a random order: a jittered block, sloshing surface."""
    ix, iy, iz = np.meshgrid(*(np.arange(n, dtype=np.float32) for n in FLUID), indexing="ij")
    x = (ix + 0.5) * DX
    z = (iz + 0.5) * DX
    height = FLUID[1] * DX * (1.0 + 0.08 * np.sin(2 * np.pi * x / 1.6) * np.cos(np.pi * z / 1.28))
    y = (iy + 0.5) / FLUID[1] * height              # compress / stretch each column
    pts = np.stack([x, y, z], -1).reshape(-1, 3)
    pts += (0.08 * DX) * gen.standard_normal(pts.shape).astype(np.float32)
    pts = np.clip(pts, 1e-4, None)
    out = np.empty((N, 4), np.float32)
    out[:, :3] = pts
    out[:, 3] = MASS
    return out[gen.permutation(N)]


def params():
    """inv_h, h^2, the poly6 normalisation, rho0 and the Tait B, as kernel arguments."""
    poly6 = 315.0 / (64.0 * np.pi * H ** 9)
    b = RHO0 * C0 ** 2 / GAMMA
    return tuple(np.float32(v) for v in (1.0 / H, H * H, poly6, RHO0, b))


def host_density(pts, sample):
    """float64 density of the sampled particles from a host cell list."""
    p = pts[:, :3].astype(np.float64)
    c = np.clip(np.floor(pts[:, :3] * np.float32(1.0 / H)).astype(np.int64), 0,
                np.array(CELLS) - 1)                      # the kernel's float32 rounding
    lin = (c[:, 0] * CELLS[1] + c[:, 1]) * CELLS[2] + c[:, 2]
    order = np.argsort(lin, kind="stable")
    sl = lin[order]
    poly6 = 315.0 / (64.0 * np.pi * H ** 9)
    rho = np.empty(len(sample))
    for t, i in enumerate(sample):
        cand = []
        for cx in range(max(c[i, 0] - 1, 0), min(c[i, 0] + 2, CELLS[0])):
            for cy in range(max(c[i, 1] - 1, 0), min(c[i, 1] + 2, CELLS[1])):
                cell0 = (cx * CELLS[1] + cy) * CELLS[2]
                lo = np.searchsorted(sl, cell0 + max(c[i, 2] - 1, 0))
                hi = np.searchsorted(sl, cell0 + min(c[i, 2] + 1, CELLS[2] - 1), "right")
                cand.append(order[lo:hi])
        j = np.concatenate(cand)
        r2 = ((p[j] - p[i]) ** 2).sum(1)
        q = np.maximum(H * H - r2, 0.0)
        rho[t] = poly6 * (pts[j, 3].astype(np.float64) * q ** 3).sum()
    return rho


def main():
    p = parser(__doc__)
    p.add_argument("--reorder", action="store_true",
                   help="gather positions into cell order, density over the sorted particles")
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=SPH_SRC, options=("-std=c++17",))
    cell_kernel = mod.get_function("cell_index")
    bounds_kernel = mod.get_function("cell_bounds")
    reorder_kernel = mod.get_function("reorder_particles")
    density_kernel = mod.get_function("sph_density")
    density_sorted_kernel = mod.get_function("sph_density_sorted")

    gen = np.random.default_rng(0)
    pts_h = make_particles(gen)
    pos = cp.asarray(pts_h)
    n_cells = CELLS[0] * CELLS[1] * CELLS[2]
    cell = cp.empty(N, cp.int32)
    cell_start = cp.zeros(n_cells, cp.int32)
    cell_end = cp.zeros(n_cells, cp.int32)
    sorted_pos = cp.empty_like(pos)
    rho = cp.empty(N, cp.float32)
    pres = cp.empty(N, cp.float32)
    sp = params()
    n = np.int32(N)
    grid = ((N + BLOCK - 1) // BLOCK,)
    state = {}

    def step():
        cell_kernel(grid, (BLOCK,), (pos, n, np.float32(1.0 / H), cell))
        order = cp.argsort(cell)
        sorted_cell = cell[order]
        cell_start.fill(0)
        cell_end.fill(0)
        bounds_kernel(grid, (BLOCK,), (sorted_cell, n, cell_start, cell_end))
        if args.reorder:
            reorder_kernel(grid, (BLOCK,), (pos, order, n, sorted_pos))
            density_sorted_kernel(grid, (BLOCK,), (sorted_pos, order, cell_start, cell_end, n,
                                                   *sp, rho, pres))
        else:
            density_kernel(grid, (BLOCK,), (pos, order, cell_start, cell_end, n, *sp, rho,
                                            pres))
        state["order"] = order

    def check():
        if state["order"].dtype != cp.int64:
            raise AssertionError(f"argsort returned {state['order'].dtype}, kernels take int64")
        got_rho = cp.asnumpy(rho)
        got_p = cp.asnumpy(pres)
        sample = np.random.default_rng(1).choice(N, 3000, replace=False)
        want = host_density(pts_h, sample)
        err = np.abs(got_rho[sample] - want) / want
        if not err.max() < 2e-4:
            raise AssertionError(f"density off by {err.max():.3g} (relative)")
        b = RHO0 * C0 ** 2 / GAMMA
        want_p = b * ((got_rho.astype(np.float64) / RHO0) ** GAMMA - 1.0)
        if not np.abs(got_p - want_p).max() < 1e-3 * b:
            raise AssertionError("pressure differs from the Tait equation")
        med = np.median(got_rho)
        if not (0.9 * RHO0 < med < 1.1 * RHO0 and got_rho.min() > 0.2 * RHO0):
            raise AssertionError(f"implausible densities: median {med:.1f}, "
                                 f"min {got_rho.min():.1f}")

    run(step, name="cuda_sph_density", backend="cupy", args=args,
        variant="reorder" if args.reorder else "baseline", check=check)


if __name__ == "__main__":
    main()
