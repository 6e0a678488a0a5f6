"""Memory access layouts in CuPy raw kernels, each job written two ways.

A particle position update on an array of structs and on separate arrays; a permutation of
2^25 floats as a scatter and as a gather; a 128 MB copy with float4 loads from an offset
pointer, from an aligned pointer, and with one float per thread; and per-row sums of a
16384 x 2048 matrix with one thread per row and with one warp per row.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

PARTICLE_SRC = r"""
struct Particle {
    float x, y, z;
    float vx, vy, vz;
    float mass, charge;
};

// Array of structs: one thread per particle, advances x by vx * dt.
extern "C" __global__ void particles_aos_update(Particle* p, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i].x += p[i].vx * dt;
    }
}

// Structure of arrays: the same update on the x and vx arrays.
extern "C" __global__ void particles_soa_update(float* x, const float* vx, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] += vx[i] * dt;
    }
}
"""

PERMUTE_SRC = r"""
// out[(i * stride) mod n] = in[i]; n is a power of two and stride is odd.
extern "C" __global__ void permute_scatter(const float* __restrict__ in, float* __restrict__ out,
                                           unsigned int stride, unsigned int mask, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int j = ((unsigned int)i * stride) & mask;
        out[j] = in[i];
    }
}

// The same permutation as a gather: out[i] = in[(i * inv_stride) mod n].
extern "C" __global__ void permute_gather(const float* __restrict__ in, float* __restrict__ out,
                                          unsigned int inv_stride, unsigned int mask, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int j = ((unsigned int)i * inv_stride) & mask;
        out[i] = in[j];
    }
}
"""

COPY_SRC = r"""
// Vector copy, one float4 per thread.
extern "C" __global__ void copy_float4(const float4* __restrict__ src, float4* __restrict__ dst,
                                       int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        dst[i] = src[i];
    }
}

// Scalar copy, one float per thread.
extern "C" __global__ void copy_float(const float* __restrict__ src, float* __restrict__ dst,
                                      int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i];
    }
}
"""

ROWSUM_SRC = r"""
// One thread per row walks the whole row.
extern "C" __global__ void row_sum_thread(const float* __restrict__ a, float* __restrict__ out,
                                          int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = a + (size_t)r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) {
        s += row[c];
    }
    out[r] = s;
}

// One warp per row: lanes stride across the row, then a shuffle reduction.
extern "C" __global__ void row_sum_warp(const float* __restrict__ a, float* __restrict__ out,
                                        int rows, int cols)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= rows) return;
    const float* row = a + (size_t)warp * cols;
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) {
        s += row[c];
    }
    for (int off = 16; off > 0; off >>= 1) {
        s += __shfl_down_sync(0xffffffffu, s, off);
    }
    if (lane == 0) out[warp] = s;
}
"""

N_PARTICLES = 8 * 1024 * 1024
N = 1 << 25                      # floats in the permutation and copy buffers (128 MB)
STRIDE = 4099
INV_STRIDE = pow(STRIDE, -1, N)
ROWS, COLS = 16384, 2048
DT = 0.01
BLOCK = 256


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp
    import numpy as np

    rng = np.random.default_rng(1234)

    particles = cp.RawModule(code=PARTICLE_SRC)
    aos_update = particles.get_function("particles_aos_update")
    soa_update = particles.get_function("particles_soa_update")
    permute = cp.RawModule(code=PERMUTE_SRC)
    scatter = permute.get_function("permute_scatter")
    gather = permute.get_function("permute_gather")
    copies = cp.RawModule(code=COPY_SRC)
    copy4 = copies.get_function("copy_float4")
    copy1 = copies.get_function("copy_float")
    rowsums = cp.RawModule(code=ROWSUM_SRC)
    row_sum_thread = rowsums.get_function("row_sum_thread")
    row_sum_warp = rowsums.get_function("row_sum_warp")

    # Particles: 8 floats per particle, x and vx also kept as separate arrays.
    host_p = rng.standard_normal((N_PARTICLES, 8), dtype=np.float32)
    aos = cp.asarray(host_p)                       # (n, 8) rows are the struct fields
    x0 = host_p[:, 0].copy()
    vx = host_p[:, 3].copy()
    soa_x = cp.asarray(x0)
    soa_vx = cp.asarray(vx)

    # Permutation / copy source: 2^25 floats plus room for an offset view.
    host_src = rng.random(N + 32, dtype=np.float32)
    src_buf = cp.asarray(host_src)
    src = src_buf[:N]
    assert src.data.ptr % 128 == 0
    src_off = src_buf[4:N + 4]                     # 16 bytes past a 128-byte boundary
    out_scatter = cp.empty(N, dtype=cp.float32)
    out_gather = cp.empty(N, dtype=cp.float32)
    dst = cp.empty(N, dtype=cp.float32)

    mat = cp.asarray(rng.random((ROWS, COLS), dtype=np.float32))
    sums_thread = cp.empty(ROWS, dtype=cp.float32)
    sums_warp = cp.empty(ROWS, dtype=cp.float32)

    grid_p = (N_PARTICLES + BLOCK - 1) // BLOCK
    grid_n = (N + BLOCK - 1) // BLOCK
    n4 = N // 4
    grid_n4 = (n4 + BLOCK - 1) // BLOCK
    grid_rows_thread = (ROWS + BLOCK - 1) // BLOCK
    grid_rows_warp = (ROWS * 32 + BLOCK - 1) // BLOCK
    steps = [0]

    def launch_copy4(from_arr):
        copy4((grid_n4,), (BLOCK,), (from_arr, dst, cp.int32(n4)))

    def launch_copy1():
        copy1((grid_n,), (BLOCK,), (src, dst, cp.int32(N)))

    def step():
        aos_update((grid_p,), (BLOCK,), (aos, cp.float32(DT), cp.int32(N_PARTICLES)))
        soa_update((grid_p,), (BLOCK,), (soa_x, soa_vx, cp.float32(DT), cp.int32(N_PARTICLES)))
        scatter((grid_n,), (BLOCK,), (src, out_scatter, cp.uint32(STRIDE), cp.uint32(N - 1),
                                      cp.int32(N)))
        gather((grid_n,), (BLOCK,), (src, out_gather, cp.uint32(INV_STRIDE), cp.uint32(N - 1),
                                     cp.int32(N)))
        launch_copy4(src_off)
        launch_copy4(src)
        launch_copy1()
        row_sum_thread((grid_rows_thread,), (BLOCK,), (mat, sums_thread, cp.int32(ROWS),
                                                      cp.int32(COLS)))
        row_sum_warp((grid_rows_warp,), (BLOCK,), (mat, sums_warp, cp.int32(ROWS),
                                                  cp.int32(COLS)))
        steps[0] += 1

    def check():
        cp.cuda.Device().synchronize()
        # positions after k updates, replayed on the host in float32
        ref_x = x0.copy()
        for _ in range(steps[0]):
            ref_x = ref_x + vx * np.float32(DT)
        got_aos = cp.asnumpy(aos[:, 0])
        got_soa = cp.asnumpy(soa_x)
        for name, got in (("particles_aos_update", got_aos), ("particles_soa_update", got_soa)):
            if not np.allclose(got, ref_x, rtol=1e-5, atol=1e-5):
                raise AssertionError(f"{name}: max error {np.abs(got - ref_x).max()}")
        if not np.array_equal(cp.asnumpy(aos[:, 1:]), host_p[:, 1:]):
            raise AssertionError("particles_aos_update touched other fields")

        ref_perm = np.empty(N, dtype=np.float32)
        idx = (np.arange(N, dtype=np.int64) * STRIDE) & (N - 1)
        ref_perm[idx] = host_src[:N]
        del idx
        for name, got in (("permute_scatter", out_scatter), ("permute_gather", out_gather)):
            if not np.array_equal(cp.asnumpy(got), ref_perm):
                raise AssertionError(f"{name}: permutation differs from numpy")

        # the three copies share dst: run each on its own and compare
        for name, launch, ref in (("copy_float4 (offset)", lambda: launch_copy4(src_off), src_off),
                                  ("copy_float4", lambda: launch_copy4(src), src),
                                  ("copy_float", launch_copy1, src)):
            dst.fill(0)
            launch()
            if not bool(cp.array_equal(dst, ref)):
                raise AssertionError(f"{name}: copy differs from source")

        ref_sums = cp.asnumpy(mat.sum(axis=1))
        for name, got in (("row_sum_thread", sums_thread), ("row_sum_warp", sums_warp)):
            got = cp.asnumpy(got)
            if not np.allclose(got, ref_sums, rtol=1e-4, atol=1e-3):
                raise AssertionError(f"{name}: max error {np.abs(got - ref_sums).max()}")
        cp.get_default_memory_pool().free_all_blocks()

    run(step, name="cuda_memory_access", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
