"""Arithmetic and launch patterns in CuPy raw kernels, each job written two ways.

Per-thread 16-bin sums in a local array and in shared memory; a grid-stride AXPY launched
with 8 blocks and with 132*8 blocks; 32 rounds of sinf/cosf/expf with the accurate library
functions and with the hardware intrinsics; a periodic 8-corner stencil on a 256^3 grid
indexed with 64-bit div/mod and with a 3-D launch; two math loops chosen per thread and per
warp; a Newton solve in double and in float; a block reversal with and without 96 KB of
dynamic shared memory per block.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

BINS_SRC = r"""
#define NBINS 16
#define PER_THREAD 64

__device__ __forceinline__ int bucket_of(float v)
{
    int b = (int)(v * (float)NBINS);
    return min(max(b, 0), NBINS - 1);
}

// Each thread reads PER_THREAD values (strided by the thread count) and sums them into
// 16 buckets of width 1/16; the sums go to out[bin * nthreads + thread].
extern "C" __global__ void bin_sums_local(const float* __restrict__ in, float* __restrict__ out,
                                          int nthreads)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    float bins[NBINS];
    for (int j = 0; j < NBINS; ++j) bins[j] = 0.0f;
    for (int k = 0; k < PER_THREAD; ++k) {
        float v = in[(size_t)k * nthreads + t];
        bins[bucket_of(v)] += v;
    }
    for (int j = 0; j < NBINS; ++j) out[(size_t)j * nthreads + t] = bins[j];
}

// Same sums, kept in shared memory: one column of 16 slots per thread of the block.
extern "C" __global__ void bin_sums_shared(const float* __restrict__ in, float* __restrict__ out,
                                           int nthreads)
{
    __shared__ float bins[NBINS][256];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int s = threadIdx.x;
    if (t >= nthreads) return;
    for (int j = 0; j < NBINS; ++j) bins[j][s] = 0.0f;
    for (int k = 0; k < PER_THREAD; ++k) {
        float v = in[(size_t)k * nthreads + t];
        bins[bucket_of(v)][s] += v;
    }
    for (int j = 0; j < NBINS; ++j) out[(size_t)j * nthreads + t] = bins[j][s];
}
"""

AXPY_SRC = r"""
// z = a * x + y with a grid-stride loop; works for any grid size.
extern "C" __global__ void axpy_grid_stride(const float* __restrict__ x,
                                            const float* __restrict__ y,
                                            float* __restrict__ z, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        z[i] = a * x[i] + y[i];
    }
}
"""

TRANSCENDENTAL_SRC = r"""
#define ROUNDS 32

// 32 rounds of v = 0.4 sin(v + x) + 0.3 cos(v) + 0.2 exp(-v^2), library functions.
extern "C" __global__ void iterate_libm(const float* __restrict__ x, float* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = x[i];
    float v = 0.0f;
    for (int r = 0; r < ROUNDS; ++r) {
        v = 0.4f * sinf(v + xi) + 0.3f * cosf(v) + 0.2f * expf(-v * v);
    }
    out[i] = v;
}

// The same rounds with the hardware approximations.
extern "C" __global__ void iterate_intrinsics(const float* __restrict__ x, float* __restrict__ out,
                                              int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = x[i];
    float v = 0.0f;
    for (int r = 0; r < ROUNDS; ++r) {
        v = 0.4f * __sinf(v + xi) + 0.3f * __cosf(v) + 0.2f * __expf(-v * v);
    }
    out[i] = v;
}
"""

STENCIL_SRC = r"""
// Mean of the 8 diagonal neighbours (x+-1, y+-1, z+-1) with periodic wrap.
// Linear index per thread, coordinates recovered with 64-bit division and modulo.
extern "C" __global__ void corners_linear(const float* __restrict__ in, float* __restrict__ out,
                                          long long nx, long long ny, long long nz)
{
    long long total = nx * ny * nz;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    long long x = idx % nx;
    long long y = (idx / nx) % ny;
    long long z = idx / (nx * ny);
    float s = 0.0f;
    for (int k = 0; k < 8; ++k) {
        long long dx = (k & 1) ? 1 : -1;
        long long dy = (k & 2) ? 1 : -1;
        long long dz = (k & 4) ? 1 : -1;
        long long xn = (x + dx + nx) % nx;
        long long yn = (y + dy + ny) % ny;
        long long zn = (z + dz + nz) % nz;
        s += in[(zn * ny + yn) * nx + xn];
    }
    out[idx] = s * 0.125f;
}

// Same stencil on a 3-D launch grid with 32-bit coordinates and compare-based wrap.
extern "C" __global__ void corners_3d(const float* __restrict__ in, float* __restrict__ out,
                                      int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    int xm = (x == 0) ? nx - 1 : x - 1, xp = (x == nx - 1) ? 0 : x + 1;
    int ym = (y == 0) ? ny - 1 : y - 1, yp = (y == ny - 1) ? 0 : y + 1;
    int zm = (z == 0) ? nz - 1 : z - 1, zp = (z == nz - 1) ? 0 : z + 1;
    int plane = nx * ny;
    const float* pm = in + zm * plane;
    const float* pp = in + zp * plane;
    float s = pm[ym * nx + xm] + pm[ym * nx + xp] + pm[yp * nx + xm] + pm[yp * nx + xp]
            + pp[ym * nx + xm] + pp[ym * nx + xp] + pp[yp * nx + xm] + pp[yp * nx + xp];
    out[(z * ny + y) * nx + x] = s * 0.125f;
}
"""

BRANCH_SRC = r"""
#define ITERS 64

__device__ __forceinline__ float loop_poly(float v)
{
    for (int k = 0; k < ITERS; ++k) v = (0.25f * v - 0.5f) * v + 0.75f;
    return v;
}

__device__ __forceinline__ float loop_sqrt(float v)
{
    for (int k = 0; k < ITERS; ++k) v = sqrtf(v + 1.0f) * 0.5f;
    return v;
}

// Odd threads run the polynomial loop, even threads the square-root loop.
extern "C" __global__ void two_loops_by_thread(const float* __restrict__ in,
                                               float* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = in[i];
    if (threadIdx.x & 1) v = loop_poly(v);
    else v = loop_sqrt(v);
    out[i] = v;
}

// Odd warps run the polynomial loop, even warps the square-root loop.
extern "C" __global__ void two_loops_by_warp(const float* __restrict__ in,
                                             float* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = in[i];
    if ((threadIdx.x >> 5) & 1) v = loop_poly(v);
    else v = loop_sqrt(v);
    out[i] = v;
}
"""

NEWTON_SRC = r"""
#define NEWTON_ITERS 12

// Real root of y^3 + y = x by Newton's method, computed in double.
extern "C" __global__ void cubic_root_f64(const float* __restrict__ x, float* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double xi = x[i];
    double y = xi;
    for (int k = 0; k < NEWTON_ITERS; ++k) {
        double f = y * y * y + y - xi;
        double d = 3.0 * y * y + 1.0;
        y -= f / d;
    }
    out[i] = (float)y;
}

// The same solve in float.
extern "C" __global__ void cubic_root_f32(const float* __restrict__ x, float* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = x[i];
    float y = xi;
    for (int k = 0; k < NEWTON_ITERS; ++k) {
        float f = y * y * y + y - xi;
        float d = 3.0f * y * y + 1.0f;
        y -= f / d;
    }
    out[i] = y;
}
"""

REVERSE_SRC = r"""
// Reverses each blockDim.x-long segment through a shared staging buffer.
extern "C" __global__ void reverse_segments(const float* __restrict__ in, float* __restrict__ out,
                                            int n)
{
    extern __shared__ float stage[];
    int base = blockIdx.x * blockDim.x;
    int t = threadIdx.x;
    if (base + t < n) stage[t] = in[base + t];
    __syncthreads();
    int src = blockDim.x - 1 - t;
    if (base + src < n) out[base + t] = stage[src];
}
"""

REVERSE_STATIC_SRC = r"""
#define SEG 256

// Same reversal with a 1 KB static staging buffer.
extern "C" __global__ void reverse_segments_static(const float* __restrict__ in,
                                                   float* __restrict__ out, int n)
{
    __shared__ float stage[SEG];
    int base = blockIdx.x * SEG;
    int t = threadIdx.x;
    if (base + t < n) stage[t] = in[base + t];
    __syncthreads();
    int src = SEG - 1 - t;
    if (base + src < n) out[base + t] = stage[src];
}
"""

N_BIG = 1 << 25                    # 128 MB of floats
N_MID = 1 << 24
N_TRIG = 1 << 22
BIN_THREADS = N_BIG // 64
NX = NY = NZ = 256
SMEM_STAGE = 96 * 1024             # staging buffer size the tiled launch reserves
A = 1.5
BLOCK = 256


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp

    cp.random.seed(7)

    bins_mod = cp.RawModule(code=BINS_SRC)
    bin_sums_local = bins_mod.get_function("bin_sums_local")
    bin_sums_shared = bins_mod.get_function("bin_sums_shared")
    axpy = cp.RawKernel(AXPY_SRC, "axpy_grid_stride")
    trig_mod = cp.RawModule(code=TRANSCENDENTAL_SRC)
    iterate_libm = trig_mod.get_function("iterate_libm")
    iterate_intrinsics = trig_mod.get_function("iterate_intrinsics")
    stencil_mod = cp.RawModule(code=STENCIL_SRC)
    corners_linear = stencil_mod.get_function("corners_linear")
    corners_3d = stencil_mod.get_function("corners_3d")
    branch_mod = cp.RawModule(code=BRANCH_SRC)
    by_thread = branch_mod.get_function("two_loops_by_thread")
    by_warp = branch_mod.get_function("two_loops_by_warp")
    newton_mod = cp.RawModule(code=NEWTON_SRC)
    newton_f64 = newton_mod.get_function("cubic_root_f64")
    newton_f32 = newton_mod.get_function("cubic_root_f32")
    reverse_dyn = cp.RawKernel(REVERSE_SRC, "reverse_segments")
    reverse_dyn.max_dynamic_shared_size_bytes = SMEM_STAGE
    reverse_static = cp.RawKernel(REVERSE_STATIC_SRC, "reverse_segments_static")

    u = cp.random.random(N_BIG, dtype=cp.float32)              # uniform [0, 1)
    grid_x = cp.random.uniform(-2.0, 2.0, N_TRIG).astype(cp.float32)
    newton_x = cp.random.uniform(0.01, 4.0, N_MID).astype(cp.float32)
    x_mid, y_mid = u[:N_MID], u[N_MID:]
    field = u[:N_MID]                                          # 256^3 grid, z-major

    bins_local = cp.empty(16 * BIN_THREADS, dtype=cp.float32)
    bins_shared = cp.empty(16 * BIN_THREADS, dtype=cp.float32)
    z_few = cp.empty(N_MID, dtype=cp.float32)
    z_many = cp.empty(N_MID, dtype=cp.float32)
    trig_libm = cp.empty(N_TRIG, dtype=cp.float32)
    trig_fast = cp.empty(N_TRIG, dtype=cp.float32)
    st_linear = cp.empty(N_MID, dtype=cp.float32)
    st_3d = cp.empty(N_MID, dtype=cp.float32)
    br_thread = cp.empty(N_MID, dtype=cp.float32)
    br_warp = cp.empty(N_MID, dtype=cp.float32)
    nt_f64 = cp.empty(N_MID, dtype=cp.float32)
    nt_f32 = cp.empty(N_MID, dtype=cp.float32)
    rev_dyn = cp.empty(N_BIG, dtype=cp.float32)
    rev_static = cp.empty(N_BIG, dtype=cp.float32)

    def blocks(n):
        return (n + BLOCK - 1) // BLOCK

    def step():
        bin_sums_local((blocks(BIN_THREADS),), (BLOCK,), (u, bins_local, cp.int32(BIN_THREADS)))
        bin_sums_shared((blocks(BIN_THREADS),), (BLOCK,), (u, bins_shared, cp.int32(BIN_THREADS)))
        axpy((8,), (BLOCK,), (x_mid, y_mid, z_few, cp.float32(A), cp.int32(N_MID)))
        axpy((132 * 8,), (BLOCK,), (x_mid, y_mid, z_many, cp.float32(A), cp.int32(N_MID)))
        iterate_libm((blocks(N_TRIG),), (BLOCK,), (grid_x, trig_libm, cp.int32(N_TRIG)))
        iterate_intrinsics((blocks(N_TRIG),), (BLOCK,), (grid_x, trig_fast, cp.int32(N_TRIG)))
        corners_linear((blocks(N_MID),), (BLOCK,),
                       (field, st_linear, cp.int64(NX), cp.int64(NY), cp.int64(NZ)))
        corners_3d((NX // 32, NY // 4, NZ // 2), (32, 4, 2),
                   (field, st_3d, cp.int32(NX), cp.int32(NY), cp.int32(NZ)))
        by_thread((blocks(N_MID),), (BLOCK,), (u, br_thread, cp.int32(N_MID)))
        by_warp((blocks(N_MID),), (BLOCK,), (u, br_warp, cp.int32(N_MID)))
        newton_f64((blocks(N_MID),), (BLOCK,), (newton_x, nt_f64, cp.int32(N_MID)))
        newton_f32((blocks(N_MID),), (BLOCK,), (newton_x, nt_f32, cp.int32(N_MID)))
        reverse_dyn((blocks(N_BIG),), (BLOCK,), (u, rev_dyn, cp.int32(N_BIG)),
                    shared_mem=SMEM_STAGE)
        reverse_static((blocks(N_BIG),), (BLOCK,), (u, rev_static, cp.int32(N_BIG)))

    def expect_close(name, got, ref, rtol, atol):
        if not bool(cp.allclose(got, ref, rtol=rtol, atol=atol)):
            err = float(cp.abs(got - ref).max())
            raise AssertionError(f"{name}: max abs error {err} (rtol {rtol}, atol {atol})")

    def check():
        # bucket sums: inputs viewed as (64, threads), summed per bucket along axis 0
        vals = u.reshape(64, BIN_THREADS)
        cols = cp.arange(BIN_THREADS)
        ref = cp.zeros((16, BIN_THREADS), dtype=cp.float32)
        for k in range(64):
            row = vals[k]
            ref[cp.clip((row * 16).astype(cp.int32), 0, 15), cols] += row
        del cols
        expect_close("bin_sums_local", bins_local.reshape(16, -1), ref, 1e-5, 1e-5)
        expect_close("bin_sums_shared", bins_shared.reshape(16, -1), ref, 1e-5, 1e-5)
        del ref

        ref = A * x_mid + y_mid
        expect_close("axpy (8 blocks)", z_few, ref, 1e-6, 1e-6)
        expect_close("axpy (1056 blocks)", z_many, ref, 1e-6, 1e-6)

        v = cp.zeros_like(grid_x)
        for _ in range(32):
            v = (0.4 * cp.sin(v + grid_x) + 0.3 * cp.cos(v) + 0.2 * cp.exp(-v * v)).astype(cp.float32)
        expect_close("iterate_libm", trig_libm, v, 1e-5, 1e-5)
        expect_close("iterate_intrinsics", trig_fast, v, 1e-3, 2e-4)

        f = field.reshape(NZ, NY, NX)
        ref = cp.zeros_like(f)
        for dz in (-1, 1):
            for dy in (-1, 1):
                for dx in (-1, 1):
                    ref += cp.roll(f, shift=(-dz, -dy, -dx), axis=(0, 1, 2))
        ref *= 0.125
        expect_close("corners_linear", st_linear.reshape(NZ, NY, NX), ref, 1e-5, 1e-6)
        expect_close("corners_3d", st_3d.reshape(NZ, NY, NX), ref, 1e-5, 1e-6)
        del ref, f

        src = u[:N_MID]
        poly = src.copy()
        sq = src.copy()
        for _ in range(64):
            poly = (0.25 * poly - 0.5) * poly + 0.75
            sq = cp.sqrt(sq + 1.0) * 0.5
        tid = cp.arange(N_MID, dtype=cp.int32) % BLOCK       # threadIdx.x of each element
        expect_close("two_loops_by_thread", br_thread,
                     cp.where((tid & 1) == 1, poly, sq), 1e-5, 1e-6)
        expect_close("two_loops_by_warp", br_warp,
                     cp.where(((tid >> 5) & 1) == 1, poly, sq), 1e-5, 1e-6)
        del poly, sq, tid

        # closed form (Cardano) for the real root of y^3 + y - x
        xd = newton_x.astype(cp.float64)
        s = cp.sqrt(xd * xd / 4 + 1.0 / 27)
        ref = (cp.cbrt(xd / 2 + s) + cp.cbrt(xd / 2 - s)).astype(cp.float32)
        expect_close("cubic_root_f64", nt_f64, ref, 1e-6, 1e-7)
        expect_close("cubic_root_f32", nt_f32, ref, 1e-5, 1e-6)
        del xd, s, ref

        ref = u.reshape(-1, BLOCK)[:, ::-1].ravel()
        for name, got in (("reverse_segments", rev_dyn), ("reverse_segments_static", rev_static)):
            if not bool(cp.array_equal(got, ref)):
                raise AssertionError(f"{name}: segments not reversed")
        del ref
        cp.get_default_memory_pool().free_all_blocks()

    run(step, name="cuda_compute_patterns", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
