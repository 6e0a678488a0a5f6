"""One Lloyd iteration of k-means in CuPy raw kernels, then a bitonic sort of distances.

2^20 points of 16 float32 features, K = 64 centroids. The assignment kernel finds each
point's nearest centroid and adds the point into that centroid's running sums; it is written
once reading the centroids from global memory and adding straight into the global sums, and
once with the centroids and per-block partial sums in shared memory. A small kernel turns
sums and counts into new centroids. Then the squared distances of the first 16384 points
are sorted with a bitonic network: one shared-memory kernel sorts 2048-key chunks, and
each merge stage runs as global-memory steps for the long strides followed by a
shared-memory kernel for the strides that fit in a chunk.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

N, D, K = 1 << 20, 16, 64
SORT_N = 1 << 14
CHUNK = 2048             # keys per block in the shared-memory bitonic kernels (1024 threads)

KMEANS_SRC = r"""
#define D %(D)d
#define K %(K)d

extern "C" __global__ void kmeans_assign(const float* __restrict__ points,
                                         const float* __restrict__ centroids,
                                         int* __restrict__ labels, float* __restrict__ dist2,
                                         float* __restrict__ sums, int* __restrict__ counts,
                                         int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float p[D];
    for (int d = 0; d < D; d++) p[d] = points[(size_t)i * D + d];
    float best = 3.402823466e+38f;
    int best_k = 0;
    for (int k = 0; k < K; k++) {
        float s = 0.0f;
        for (int d = 0; d < D; d++) {
            float diff = p[d] - centroids[k * D + d];
            s += diff * diff;
        }
        if (s < best) {
            best = s;
            best_k = k;
        }
    }
    labels[i] = best_k;
    dist2[i] = best;
    for (int d = 0; d < D; d++) atomicAdd(&sums[best_k * D + d], p[d]);
    atomicAdd(&counts[best_k], 1);
}

extern "C" __global__ void kmeans_assign_smem(const float* __restrict__ points,
                                              const float* __restrict__ centroids,
                                              int* __restrict__ labels,
                                              float* __restrict__ dist2,
                                              float* __restrict__ sums,
                                              int* __restrict__ counts, int n)
{
    __shared__ float c_s[K * D];
    __shared__ float sum_s[K * D];
    __shared__ int cnt_s[K];
    for (int t = threadIdx.x; t < K * D; t += blockDim.x) {
        c_s[t] = centroids[t];
        sum_s[t] = 0.0f;
    }
    for (int t = threadIdx.x; t < K; t += blockDim.x) cnt_s[t] = 0;
    __syncthreads();

    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float p[D];
        const float4* p4 = reinterpret_cast<const float4*>(points + (size_t)i * D);
#pragma unroll
        for (int q = 0; q < D / 4; q++) {
            float4 v = p4[q];
            p[4 * q] = v.x; p[4 * q + 1] = v.y; p[4 * q + 2] = v.z; p[4 * q + 3] = v.w;
        }
        float best = 3.402823466e+38f;
        int best_k = 0;
        for (int k = 0; k < K; k++) {
            float s = 0.0f;
#pragma unroll
            for (int d = 0; d < D; d++) {
                float diff = p[d] - c_s[k * D + d];
                s += diff * diff;
            }
            if (s < best) {
                best = s;
                best_k = k;
            }
        }
        labels[i] = best_k;
        dist2[i] = best;
#pragma unroll
        for (int d = 0; d < D; d++) atomicAdd(&sum_s[best_k * D + d], p[d]);
        atomicAdd(&cnt_s[best_k], 1);
    }
    __syncthreads();
    for (int t = threadIdx.x; t < K * D; t += blockDim.x) {
        if (sum_s[t] != 0.0f) atomicAdd(&sums[t], sum_s[t]);
    }
    for (int t = threadIdx.x; t < K; t += blockDim.x) {
        if (cnt_s[t]) atomicAdd(&counts[t], cnt_s[t]);
    }
}

extern "C" __global__ void kmeans_update(const float* __restrict__ sums,
                                         const int* __restrict__ counts,
                                         float* __restrict__ centroids)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= K * D) return;
    int c = counts[t / D];
    if (c > 0) centroids[t] = sums[t] / c;
}
""" % {"D": D, "K": K}

BITONIC_SRC = r"""
#define CHUNK %(CHUNK)d

__device__ __forceinline__ void cmp_swap(float* s, int a, int b, bool up)
{
    float x = s[a], y = s[b];
    if ((x > y) == up) {
        s[a] = y;
        s[b] = x;
    }
}

// Sorts each CHUNK-key chunk; chunks alternate ascending/descending so that pairs of chunks
// form bitonic sequences for the first global merge stage.
extern "C" __global__ void bitonic_sort_chunk(float* __restrict__ keys)
{
    __shared__ float s[CHUNK];
    float* base = keys + (size_t)blockIdx.x * CHUNK;
    s[threadIdx.x] = base[threadIdx.x];
    s[threadIdx.x + CHUNK / 2] = base[threadIdx.x + CHUNK / 2];
    __syncthreads();
    for (int k = 2; k <= CHUNK; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            int t = threadIdx.x;
            int a = 2 * j * (t / j) + (t %% j);
            int g = blockIdx.x * CHUNK + a;
            bool up = ((g & k) == 0);
            cmp_swap(s, a, a + j, up);
            __syncthreads();
        }
    }
    base[threadIdx.x] = s[threadIdx.x];
    base[threadIdx.x + CHUNK / 2] = s[threadIdx.x + CHUNK / 2];
}

// One compare-exchange step of stride j within merge size k, one thread per element.
extern "C" __global__ void bitonic_step_global(float* __restrict__ keys, int j, int k, int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int partner = i ^ j;
    if (partner > i) {
        float a = keys[i], b = keys[partner];
        bool up = ((i & k) == 0);
        if ((a > b) == up) {
            keys[i] = b;
            keys[partner] = a;
        }
    }
}

// The steps of merge size k with strides CHUNK/2 .. 1, inside each chunk.
extern "C" __global__ void bitonic_merge_chunk(float* __restrict__ keys, int k)
{
    __shared__ float s[CHUNK];
    float* base = keys + (size_t)blockIdx.x * CHUNK;
    s[threadIdx.x] = base[threadIdx.x];
    s[threadIdx.x + CHUNK / 2] = base[threadIdx.x + CHUNK / 2];
    __syncthreads();
    for (int j = CHUNK / 2; j > 0; j >>= 1) {
        int t = threadIdx.x;
        int a = 2 * j * (t / j) + (t %% j);
        int g = blockIdx.x * CHUNK + a;
        bool up = ((g & k) == 0);
        cmp_swap(s, a, a + j, up);
        __syncthreads();
    }
    base[threadIdx.x] = s[threadIdx.x];
    base[threadIdx.x + CHUNK / 2] = s[threadIdx.x + CHUNK / 2];
}
""" % {"CHUNK": CHUNK}


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp

    rng = np.random.default_rng(21)
    km = cp.RawModule(code=KMEANS_SRC)
    assign = km.get_function("kmeans_assign")
    assign_smem = km.get_function("kmeans_assign_smem")
    update = km.get_function("kmeans_update")
    bm = cp.RawModule(code=BITONIC_SRC)
    sort_chunk = bm.get_function("bitonic_sort_chunk")
    step_global = bm.get_function("bitonic_step_global")
    merge_chunk = bm.get_function("bitonic_merge_chunk")

    # Points around K blob centres, initial centroids a random sample of the points
    centres = rng.standard_normal((K, D)).astype(np.float32) * 4
    host_pts = (centres[rng.integers(0, K, N)]
                + rng.standard_normal((N, D)).astype(np.float32))
    points = cp.asarray(host_pts)
    init_centroids = cp.asarray(host_pts[rng.choice(N, K, replace=False)])
    centroids = init_centroids.copy()
    labels = cp.empty(N, cp.int32)
    dist2 = cp.empty(N, cp.float32)
    sums = cp.zeros((K, D), cp.float32)
    counts = cp.zeros(K, cp.int32)
    labels_s = cp.empty(N, cp.int32)
    dist2_s = cp.empty(N, cp.float32)
    sums_s = cp.zeros((K, D), cp.float32)
    counts_s = cp.zeros(K, cp.int32)
    keys = cp.empty(SORT_N, cp.float32)
    BLOCK = 256
    grid = ((N + BLOCK - 1) // BLOCK,)
    n_ = cp.int32(N)

    def bitonic_sort(a):
        n = a.size
        sort_chunk((n // CHUNK,), (CHUNK // 2,), (a,))
        k = 2 * CHUNK
        while k <= n:
            j = k // 2
            while j >= CHUNK:
                step_global(((n + 255) // 256,), (256,), (a, cp.int32(j), cp.int32(k),
                                                          cp.int32(n)))
                j //= 2
            merge_chunk((n // CHUNK,), (CHUNK // 2,), (a, cp.int32(k)))
            k *= 2

    def step():
        # each iteration starts from the same centroids so that every step does equal work
        centroids[...] = init_centroids
        sums.fill(0)
        counts.fill(0)
        sums_s.fill(0)
        counts_s.fill(0)
        assign(grid, (BLOCK,), (points, centroids, labels, dist2, sums, counts, n_))
        assign_smem(grid, (BLOCK,), (points, centroids, labels_s, dist2_s, sums_s, counts_s, n_))
        update((K * D // 256,), (256,), (sums_s, counts_s, centroids))
        keys[...] = dist2[:SORT_N]
        bitonic_sort(keys)

    def check():
        c0 = init_centroids.get().astype(np.float64)
        sub = host_pts[:16384].astype(np.float64)
        d = ((sub[:, None, :] - c0[None]) ** 2).sum(-1)
        ref_lab = d.argmin(1)
        for name, lab, dd in (("kmeans_assign", labels, dist2),
                              ("kmeans_assign_smem", labels_s, dist2_s)):
            got = lab[:16384].get()
            agree = (got == ref_lab).mean()
            if agree < 0.999:
                raise AssertionError(f"{name}: {agree:.4f} of labels agree with numpy")
            if not np.allclose(dd[:16384].get(), d.min(1), rtol=1e-4, atol=1e-4):
                raise AssertionError(f"{name}: distances differ")
        for name, lab, s, c in (("kmeans_assign", labels, sums, counts),
                                ("kmeans_assign_smem", labels_s, sums_s, counts_s)):
            lab = lab.get()
            ref_counts = np.bincount(lab, minlength=K)
            ref_sums = np.zeros((K, D))
            np.add.at(ref_sums, lab, host_pts.astype(np.float64))
            if not np.array_equal(c.get(), ref_counts):
                raise AssertionError(f"{name}: counts differ")
            if not np.allclose(s.get(), ref_sums, rtol=1e-3, atol=1.0):
                raise AssertionError(f"{name}: sums differ")
        nz = ref_counts > 0                      # from the last (shared-memory) variant
        ref_c = c0.copy()
        ref_c[nz] = ref_sums[nz] / ref_counts[nz, None]
        if not np.allclose(centroids.get(), ref_c, rtol=1e-3, atol=1e-3):
            raise AssertionError("kmeans_update: centroids differ")
        if not np.array_equal(keys.get(), np.sort(dist2[:SORT_N].get())):
            raise AssertionError("bitonic sort: keys not sorted")

    run(step, name="cuda_kmeans_bitonic", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
