// Divergence demo: items of two kinds arrive interleaved (A, B, A, B, ...). Kind A runs a cubic
// map and kind B a quadratic map, each iterated many times, so both sides of the branch are long
// loops that the compiler cannot turn into predicated straight-line code.

#define DIVERGENCE_STEPS_A 128
#define DIVERGENCE_STEPS_B 160

// Kind A: v <- 0.98 v - 0.02 v^3 + 0.01 (a contraction on [-1, 1]).
__device__ __forceinline__ float divergence_path_a(float v) {
#pragma unroll 4
    for (int k = 0; k < DIVERGENCE_STEPS_A; ++k) {
        v = 0.98f * v - 0.02f * v * v * v + 0.01f;
    }
    return v;
}

// Kind B: v <- 0.97 v + 0.015 v^2 - 0.02 (also a contraction on [-1, 1]).
__device__ __forceinline__ float divergence_path_b(float v) {
#pragma unroll 4
    for (int k = 0; k < DIVERGENCE_STEPS_B; ++k) {
        v = 0.97f * v + 0.015f * v * v - 0.02f;
    }
    return v;
}

__device__ __forceinline__ void divergence_process(const float* x, const unsigned char* kind,
                                                   float* y, int e) {
    float v = x[e];
    // Data-dependent branch: which side runs depends on the kind read from memory.
    if (kind[e]) {
        v = divergence_path_b(v);
    } else {
        v = divergence_path_a(v);
    }
    y[e] = v;
}

// Bad: thread i processes item i, so every warp holds 16 items of each kind and executes both
// loops one after the other with half of its lanes masked off each time.
extern "C" __global__ void divergence_interleaved_paths(const float* __restrict__ x,
                                                        const unsigned char* __restrict__ kind,
                                                        float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        divergence_process(x, kind, y, i);
    }
}

// Good: remap threads to items so that a warp only sees one kind. Within every group of 64 items
// the first warp takes the 32 even (kind A) items and the second warp the 32 odd (kind B) ones.
// The branch is unchanged, but it is now uniform across each warp. (With unknown kinds, the
// general fix is to partition or sort the items by kind first.) Requires n % 64 == 0.
extern "C" __global__ void divergence_warp_uniform_paths(const float* __restrict__ x,
                                                         const unsigned char* __restrict__ kind,
                                                         float* __restrict__ y, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int e = (t & ~63) + ((t & 31) << 1) + ((t >> 5) & 1);
    if (e < n) {
        divergence_process(x, kind, y, e);
    }
}
