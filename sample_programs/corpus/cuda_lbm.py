"""D2Q9 lattice-Boltzmann (BGK) on a periodic 2048 x 2048 grid in CuPy raw kernels, with the
nine distributions stored two ways.

One fused kernel per time step pulls the nine populations from the neighbours (streaming),
computes density and velocity and relaxes towards equilibrium (collision), and writes the
cell's nine new values to the other buffer. ``lbm_aos`` keeps the nine floats of a cell
together (array of structures, ``f[cell * 9 + q]``), as a port of a CPU code usually does;
``lbm_soa`` keeps each direction in its own plane (``f[q * ncells + cell]``). Each step runs
ten time steps of each layout on its own pair of buffers; both start from the same shear
wave, so they must stay equal.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

LBM_SRC = r"""
__constant__ int CX[9] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
__constant__ int CY[9] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
__constant__ float WQ[9] = {4.0f / 9, 1.0f / 9, 1.0f / 9, 1.0f / 9, 1.0f / 9,
                            1.0f / 36, 1.0f / 36, 1.0f / 36, 1.0f / 36};

__device__ __forceinline__ void collide(float f[9], float omega)
{
    float rho = 0.0f, ux = 0.0f, uy = 0.0f;
#pragma unroll
    for (int q = 0; q < 9; ++q) {
        rho += f[q];
        ux += CX[q] * f[q];
        uy += CY[q] * f[q];
    }
    ux /= rho;
    uy /= rho;
    float usq = 1.5f * (ux * ux + uy * uy);
#pragma unroll
    for (int q = 0; q < 9; ++q) {
        float cu = 3.0f * (CX[q] * ux + CY[q] * uy);
        float feq = WQ[q] * rho * (1.0f + cu + 0.5f * cu * cu - usq);
        f[q] += omega * (feq - f[q]);
    }
}

extern "C" __global__ void lbm_aos(const float* __restrict__ fin, float* __restrict__ fout,
                                   int nx, int ny, float omega)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    float f[9];
#pragma unroll
    for (int q = 0; q < 9; ++q) {
        int xs = (x - CX[q] + nx) % nx;
        int ys = (y - CY[q] + ny) % ny;
        f[q] = fin[((size_t)ys * nx + xs) * 9 + q];
    }
    collide(f, omega);
    size_t c = (size_t)y * nx + x;
#pragma unroll
    for (int q = 0; q < 9; ++q) fout[c * 9 + q] = f[q];
}

extern "C" __global__ void lbm_soa(const float* __restrict__ fin, float* __restrict__ fout,
                                   int nx, int ny, float omega)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t ncells = (size_t)nx * ny;
    float f[9];
#pragma unroll
    for (int q = 0; q < 9; ++q) {
        int xs = (x - CX[q] + nx) % nx;
        int ys = (y - CY[q] + ny) % ny;
        f[q] = fin[q * ncells + (size_t)ys * nx + xs];
    }
    collide(f, omega);
    size_t c = (size_t)y * nx + x;
#pragma unroll
    for (int q = 0; q < 9; ++q) fout[q * ncells + c] = f[q];
}
"""

NX = NY = 2048
STEPS, TAU = 10, 0.6
CX = np.array([0, 1, 0, -1, 0, 1, -1, -1, 1])
CY = np.array([0, 0, 1, 0, -1, 1, 1, -1, -1])
WQ = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)


def shear_wave():
    """(9, NY, NX) equilibrium populations of a sinusoidal shear flow at density 1."""
    y = np.arange(NY)[:, None]
    ux = np.broadcast_to(0.05 * np.sin(2 * np.pi * y / NY), (NY, NX))
    uy = np.zeros((NY, NX))
    cu = 3 * (CX[:, None, None] * ux + CY[:, None, None] * uy)
    usq = 1.5 * (ux ** 2 + uy ** 2)
    return (WQ[:, None, None] * (1 + cu + 0.5 * cu ** 2 - usq)).astype(np.float32)


def main():
    args = parser(__doc__).parse_args()
    import cupy as cp

    mod = cp.RawModule(code=LBM_SRC)
    k_aos = mod.get_function("lbm_aos")
    k_soa = mod.get_function("lbm_soa")
    f0 = cp.asarray(shear_wave())
    soa = [f0.copy(), cp.empty_like(f0)]                        # (9, NY, NX)
    aos = [cp.ascontiguousarray(f0.transpose(1, 2, 0)), cp.empty((NY, NX, 9), cp.float32)]
    mass0 = float(cp.sum(f0, dtype=cp.float64))
    del f0
    block = (32, 8)
    grid = ((NX + block[0] - 1) // block[0], (NY + block[1] - 1) // block[1])
    omega = np.float32(1.0 / TAU)
    nx, ny = np.int32(NX), np.int32(NY)

    def step():
        for _ in range(STEPS):
            k_aos(grid, block, (aos[0], aos[1], nx, ny, omega))
            aos.reverse()                                       # newest state in aos[0]
        for _ in range(STEPS):
            k_soa(grid, block, (soa[0], soa[1], nx, ny, omega))
            soa.reverse()

    def check():
        diff = float(cp.abs(aos[0].transpose(2, 0, 1) - soa[0]).max())
        if not diff < 1e-5:
            raise AssertionError(f"AoS and SoA states differ by {diff:.3g}")
        for name, f in (("aos", aos[0]), ("soa", soa[0])):
            mass = float(cp.sum(f, dtype=cp.float64))
            if not abs(mass - mass0) < 1e-4 * mass0:
                raise AssertionError(f"{name}: mass {mass} vs {mass0}")

    run(step, name="cuda_lbm", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
