"""Stencil kernels on regular float32 grids.

A 2D 5-point Jacobi sweep on 8192 x 8192 (global loads only, then a shared-memory tile
with a one-cell halo), a 3D 7-point stencil on a 384^3 grid with one thread per point,
and a 9x9 box blur on 4096 x 4096 (81 global loads per output, then a shared-memory tile
with a 4-cell halo). Boundary cells that lack a full neighbourhood are copied unchanged.
"""

import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run
import cupy as cp

# (a) 5-point Jacobi, every neighbour read straight from global memory.
JACOBI_NAIVE = r"""
extern "C" __global__ void jacobi2d_naive(const float* __restrict__ u, float* __restrict__ v,
                                          int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    int i = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        v[i] = u[i];
        return;
    }
    v[i] = 0.25f * (u[i - nx] + u[i + nx] + u[i - 1] + u[i + 1]);
}
"""

# (b) 5-point Jacobi from a (BY+2) x (BX+2) shared tile; edge threads fetch the halo.
JACOBI_SMEM = r"""
#define BX 32
#define BY 8
extern "C" __global__ void jacobi2d_smem(const float* __restrict__ u, float* __restrict__ v,
                                         int nx, int ny)
{
    __shared__ float t[BY + 2][BX + 2];
    int x = blockIdx.x * BX + threadIdx.x;
    int y = blockIdx.y * BY + threadIdx.y;
    int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
    bool inside = (x < nx && y < ny);
    if (inside) {
        int i = y * nx + x;
        t[ly][lx] = u[i];
        if (threadIdx.x == 0 && x > 0)           t[ly][0]      = u[i - 1];
        if (threadIdx.x == BX - 1 && x < nx - 1) t[ly][BX + 1] = u[i + 1];
        if (threadIdx.y == 0 && y > 0)           t[0][lx]      = u[i - nx];
        if (threadIdx.y == BY - 1 && y < ny - 1) t[BY + 1][lx] = u[i + nx];
    }
    __syncthreads();
    if (!inside) return;
    int i = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        v[i] = t[ly][lx];
        return;
    }
    v[i] = 0.25f * (t[ly - 1][lx] + t[ly + 1][lx] + t[ly][lx - 1] + t[ly][lx + 1]);
}
"""

# (c) 3D 7-point stencil, one thread per grid point, 32x8 thread blocks, grid.z = nz.
STENCIL3D_NAIVE = r"""
extern "C" __global__ void stencil3d_7pt(const float* __restrict__ u, float* __restrict__ v,
                                         int nx, int ny, int nz, float c0, float c1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    int plane = nx * ny;
    int i = z * plane + y * nx + x;
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) {
        v[i] = u[i];
        return;
    }
    v[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx]
                             + u[i - plane] + u[i + plane]);
}
"""

# (d) 9x9 box blur, 81 global loads per output pixel.
BLUR_NAIVE = r"""
#define R 4
extern "C" __global__ void blur9_naive(const float* __restrict__ in, float* __restrict__ out,
                                       int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    if (x < R || y < R || x >= nx - R || y >= ny - R) {
        out[y * nx + x] = in[y * nx + x];
        return;
    }
    float acc = 0.0f;
    for (int dy = -R; dy <= R; ++dy)
        for (int dx = -R; dx <= R; ++dx)
            acc += in[(y + dy) * nx + (x + dx)];
    out[y * nx + x] = acc * (1.0f / ((2 * R + 1) * (2 * R + 1)));
}
"""

# (e) 9x9 box blur from a (BY+8) x (BX+8) shared tile loaded cooperatively
# (halo coordinates clamped to the image).
BLUR_SMEM = r"""
#define R 4
#define BX 32
#define BY 16
#define TW (BX + 2 * R)
#define TH (BY + 2 * R)
extern "C" __global__ void blur9_smem(const float* __restrict__ in, float* __restrict__ out,
                                      int nx, int ny)
{
    __shared__ float t[TH][TW];
    int x0 = blockIdx.x * BX - R;
    int y0 = blockIdx.y * BY - R;
    int tid = threadIdx.y * BX + threadIdx.x;
    for (int k = tid; k < TH * TW; k += BX * BY) {
        int ly = k / TW, lx = k % TW;
        int gx = min(max(x0 + lx, 0), nx - 1);
        int gy = min(max(y0 + ly, 0), ny - 1);
        t[ly][lx] = in[gy * nx + gx];
    }
    __syncthreads();

    int x = blockIdx.x * BX + threadIdx.x;
    int y = blockIdx.y * BY + threadIdx.y;
    if (x >= nx || y >= ny) return;
    if (x < R || y < R || x >= nx - R || y >= ny - R) {
        out[y * nx + x] = t[threadIdx.y + R][threadIdx.x + R];
        return;
    }
    float acc = 0.0f;
#pragma unroll
    for (int dy = 0; dy <= 2 * R; ++dy)
#pragma unroll
        for (int dx = 0; dx <= 2 * R; ++dx)
            acc += t[threadIdx.y + dy][threadIdx.x + dx];
    out[y * nx + x] = acc * (1.0f / ((2 * R + 1) * (2 * R + 1)));
}
"""

args = parser(__doc__).parse_args()

cp.random.seed(0)
NX2 = NY2 = 8192
u2 = cp.random.random_sample((NY2, NX2), dtype=cp.float32)
v2 = cp.empty_like(u2)          # (a) and (b) write the same output buffer

N3 = 384
C0, C1 = 0.4, 0.1
u3 = cp.random.random_sample((N3, N3, N3), dtype=cp.float32)
v3 = cp.empty_like(u3)

NB = 4096
RAD = 4
img = cp.random.random_sample((NB, NB), dtype=cp.float32)
blur_d = cp.empty_like(img)
blur_e = cp.empty_like(img)

jacobi_naive = cp.RawKernel(JACOBI_NAIVE, "jacobi2d_naive")
jacobi_smem = cp.RawKernel(JACOBI_SMEM, "jacobi2d_smem")
stencil3d = cp.RawKernel(STENCIL3D_NAIVE, "stencil3d_7pt")
blur_naive = cp.RawKernel(BLUR_NAIVE, "blur9_naive")
blur_smem = cp.RawKernel(BLUR_SMEM, "blur9_smem")

grid2 = ((NX2 + 31) // 32, (NY2 + 7) // 8)
grid3 = ((N3 + 31) // 32, (N3 + 7) // 8, N3)
grid_blur_d = ((NB + 31) // 32, (NB + 7) // 8)
grid_blur_e = ((NB + 31) // 32, (NB + 15) // 16)


def launch_jacobi_naive():
    jacobi_naive(grid2, (32, 8), (u2, v2, cp.int32(NX2), cp.int32(NY2)))


def launch_jacobi_smem():
    jacobi_smem(grid2, (32, 8), (u2, v2, cp.int32(NX2), cp.int32(NY2)))


def step():
    launch_jacobi_naive()
    launch_jacobi_smem()
    stencil3d(grid3, (32, 8, 1), (u3, v3, cp.int32(N3), cp.int32(N3), cp.int32(N3),
                                  cp.float32(C0), cp.float32(C1)))
    blur_naive(grid_blur_d, (32, 8), (img, blur_d, cp.int32(NB), cp.int32(NB)))
    blur_smem(grid_blur_e, (32, 16), (img, blur_e, cp.int32(NB), cp.int32(NB)))


def _compare(name, got, ref, rtol=1e-5, atol=1e-6):
    if not bool(cp.allclose(got, ref, rtol=rtol, atol=atol)):
        err = float(cp.abs(got - ref).max())
        raise AssertionError(f"{name}: max abs error {err}")


def _check_jacobi(name, band=1024):
    for r0 in range(0, NY2, band):
        r1 = min(r0 + band, NY2)
        ref = u2[r0:r1].copy()
        lo, hi = max(r0, 1), min(r1, NY2 - 1)
        ref[lo - r0:hi - r0, 1:-1] = 0.25 * (u2[lo - 1:hi - 1, 1:-1] + u2[lo + 1:hi + 1, 1:-1]
                                             + u2[lo:hi, :-2] + u2[lo:hi, 2:])
        _compare(f"{name} rows {r0}:{r1}", v2[r0:r1], ref)


def _check_stencil3d(slab=32):
    for z0 in range(0, N3, slab):
        z1 = min(z0 + slab, N3)
        ref = u3[z0:z1].copy()
        lo, hi = max(z0, 1), min(z1, N3 - 1)
        c = u3[lo:hi, 1:-1, 1:-1]
        nb = (u3[lo:hi, 1:-1, :-2] + u3[lo:hi, 1:-1, 2:]
              + u3[lo:hi, :-2, 1:-1] + u3[lo:hi, 2:, 1:-1]
              + u3[lo - 1:hi - 1, 1:-1, 1:-1] + u3[lo + 1:hi + 1, 1:-1, 1:-1])
        ref[lo - z0:hi - z0, 1:-1, 1:-1] = cp.float32(C0) * c + cp.float32(C1) * nb
        _compare(f"stencil3d_7pt z {z0}:{z1}", v3[z0:z1], ref)


def check():
    # (a) and (b) share v2, so run each one alone before comparing.
    for name, launch in (("jacobi2d_naive", launch_jacobi_naive),
                         ("jacobi2d_smem", launch_jacobi_smem)):
        v2.fill(-1.0)
        launch()
        _check_jacobi(name)
    _check_stencil3d()

    k = 2 * RAD + 1
    acc = cp.zeros((NB - 2 * RAD, NB - 2 * RAD), dtype=cp.float32)
    for dy in range(k):
        for dx in range(k):
            acc += img[dy:NB - 2 * RAD + dy, dx:NB - 2 * RAD + dx]
    ref = img.copy()
    ref[RAD:-RAD, RAD:-RAD] = acc * cp.float32(1.0 / (k * k))
    _compare("blur9_naive", blur_d, ref)
    _compare("blur9_smem", blur_e, ref)


run(step, name="cuda_stencil", backend="cupy", args=args, check=check)
