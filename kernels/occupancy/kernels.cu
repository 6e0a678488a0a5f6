// Occupancy demo: one streaming kernel body, two shared-memory footprints.
//
// Each thread walks the array with a grid-stride loop, computing y = a*x + b on float4s and
// keeping a running sum that the block reduces in shared memory at the end. The pointers are
// deliberately not __restrict__: the compiler must then keep each store before the next load,
// so a thread has one 16-byte load in flight at a time and only more resident warps can hide
// DRAM latency. That makes the kernel sensitive to occupancy, like most latency-bound code.

__device__ __forceinline__ void occupancy_scale_body(const float4* x, float4* y, float* block_sums,
                                                     float a, float b, int n4) {
    extern __shared__ float scratch[];
    float sum = 0.0f;
    int stride = gridDim.x * blockDim.x;
#pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaf(a, v.x, b);
        v.y = fmaf(a, v.y, b);
        v.z = fmaf(a, v.z, b);
        v.w = fmaf(a, v.w, b);
        y[i] = v;
        sum += (v.x + v.y) + (v.z + v.w);
    }
    // Block-wide tree reduction of the per-thread sums (blockDim.x is a power of two).
    scratch[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            scratch[threadIdx.x] += scratch[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = scratch[0];
    }
}

// Bad: launched with a 160 KB dynamic shared-memory scratch (sized for a worst case the kernel
// never reaches). Only one such block fits in an SM's 228 KB, so an SM holds 8 of its 64 warps.
extern "C" __global__ void occupancy_scale_smem_heavy(const float4* x, float4* y,
                                                      float* block_sums, float a, float b,
                                                      int n4) {
    occupancy_scale_body(x, y, block_sums, a, b, n4);
}

// Good: the same code launched with a scratch of exactly blockDim.x floats (1 KB), so 8 blocks of
// 256 threads fit per SM and theoretical occupancy is 100 %.
extern "C" __global__ void occupancy_scale_smem_lean(const float4* x, float4* y,
                                                     float* block_sums, float a, float b,
                                                     int n4) {
    occupancy_scale_body(x, y, block_sums, a, b, n4);
}
