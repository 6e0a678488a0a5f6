// Local-memory demo: dequantize 6-bit codes through a 64-entry codebook.
// codes: one 32-bit word per 4 outputs, code k of a word in bits 8k .. 8k+5.
// Output element 4w+k = lut[code_k] * gain, written as a float4 per word.
// Both kernels build their table once per thread and then stream words with a grid-stride loop.

#define LUT_SIZE 64

// Bad: each thread copies the scaled codebook into a per-thread array. Because the array is
// indexed with values read from memory, the compiler cannot map it to registers: it lives in
// local memory (256 bytes of stack per thread), and every lookup is a local load that goes through
// L1 and, with 2048 threads x 256 bytes per SM, spills further into L2.
extern "C" __global__ void local_memory_array_lookup(const float* lut,
                                                     const unsigned int* __restrict__ codes,
                                                     float4* __restrict__ out, float gain,
                                                     int n_words) {
    float table[LUT_SIZE];
#pragma unroll
    for (int k = 0; k < LUT_SIZE; ++k) {
        table[k] = lut[k] * gain;
    }
    int stride = gridDim.x * blockDim.x;
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < n_words; w += stride) {
        unsigned int c = codes[w];
        out[w] = make_float4(table[c & 63u], table[(c >> 8) & 63u], table[(c >> 16) & 63u],
                             table[(c >> 24) & 63u]);
    }
}

// Register-resident lookup: the warp holds the 64 entries in two registers per lane (entry j
// lives in lane j % 32, register lo for j < 32 and hi otherwise) and fetches with shuffles, whose
// source lane may differ per thread. No array, no local memory.
__device__ __forceinline__ float local_memory_pick(float lo, float hi, unsigned int j) {
    float a = __shfl_sync(0xffffffffu, lo, j & 31u);
    float b = __shfl_sync(0xffffffffu, hi, j & 31u);
    return (j & 32u) ? b : a;
}

// Good: same work with the table kept in registers across the warp. Requires n_words % 32 == 0
// so every warp runs the loop the same number of times (the shuffles need all 32 lanes).
extern "C" __global__ void local_memory_shuffle_lookup(const float* lut,
                                                       const unsigned int* __restrict__ codes,
                                                       float4* __restrict__ out, float gain,
                                                       int n_words) {
    const unsigned int lane = threadIdx.x & 31u;
    const float lo = lut[lane] * gain;
    const float hi = lut[lane + 32u] * gain;
    int stride = gridDim.x * blockDim.x;
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < n_words; w += stride) {
        unsigned int c = codes[w];
        out[w] = make_float4(local_memory_pick(lo, hi, c & 63u),
                             local_memory_pick(lo, hi, (c >> 8) & 63u),
                             local_memory_pick(lo, hi, (c >> 16) & 63u),
                             local_memory_pick(lo, hi, (c >> 24) & 63u));
    }
}
