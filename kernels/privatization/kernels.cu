// Privatization demo: a 16-bin histogram of 32-bit keys (bin = key & 15).
// Both kernels read the keys the same way (grid-stride loop over 16-byte uint4 loads); they differ
// only in where the counting happens.

#define PRIV_BINS 16

// Bad: every key is an atomic add on one of 16 global counters. All 16 counters share one 64-byte
// span, so the whole GPU funnels its updates into the same L2 slice and they serialize there.
extern "C" __global__ void privatization_global_atomic_hist(const uint4* __restrict__ keys,
                                                            unsigned int* __restrict__ hist,
                                                            int n4) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        uint4 k = keys[i];
        atomicAdd(&hist[k.x & (PRIV_BINS - 1)], 1u);
        atomicAdd(&hist[k.y & (PRIV_BINS - 1)], 1u);
        atomicAdd(&hist[k.z & (PRIV_BINS - 1)], 1u);
        atomicAdd(&hist[k.w & (PRIV_BINS - 1)], 1u);
    }
}

// Good: each block counts into a private copy in shared memory (fast on-chip atomics with only
// the block's own threads contending) and merges it into the global histogram once at the end:
// 16 global atomics per block instead of one per key.
extern "C" __global__ void privatization_shared_hist(const uint4* __restrict__ keys,
                                                     unsigned int* __restrict__ hist, int n4) {
    __shared__ unsigned int local_hist[PRIV_BINS];
    for (int b = threadIdx.x; b < PRIV_BINS; b += blockDim.x) {
        local_hist[b] = 0u;
    }
    __syncthreads();
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        uint4 k = keys[i];
        atomicAdd(&local_hist[k.x & (PRIV_BINS - 1)], 1u);
        atomicAdd(&local_hist[k.y & (PRIV_BINS - 1)], 1u);
        atomicAdd(&local_hist[k.z & (PRIV_BINS - 1)], 1u);
        atomicAdd(&local_hist[k.w & (PRIV_BINS - 1)], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < PRIV_BINS; b += blockDim.x) {
        if (local_hist[b] != 0u) {
            atomicAdd(&hist[b], local_hist[b]);
        }
    }
}
