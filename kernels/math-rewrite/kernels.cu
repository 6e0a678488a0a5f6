// Math-rewrite demo: row-wise softmax y = exp(x - max(x)) / sum(exp(x - max(x))).
// One block of 256 threads per row; rows are `cols` floats long (cols a multiple of 1024).

#define SOFTMAX_THREADS 256

__device__ __forceinline__ float softmax_neg_inf() { return __int_as_float(0xff800000); }

// Block-wide reductions through warp shuffles and one 32-entry shared array.
__device__ __forceinline__ float softmax_block_max(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = (lane < SOFTMAX_THREADS / 32) ? red[lane] : softmax_neg_inf();
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();  // red[] may be reused by the caller
    return v;
}

__device__ __forceinline__ float softmax_block_sum(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = (lane < SOFTMAX_THREADS / 32) ? red[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    return v;
}

// ---- Bad: the textbook safe softmax as three passes, each a kernel that reads the whole input.

// Pass 1: row maxima.
extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
math_rewrite_row_max(const float* __restrict__ x, float* __restrict__ row_max, int cols) {
    __shared__ float red[32];
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)blockIdx.x * cols);
    float m = softmax_neg_inf();
    for (int i = threadIdx.x; i < cols / 4; i += SOFTMAX_THREADS) {
        float4 v = xr[i];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    m = softmax_block_max(m, red);
    if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

// Pass 2: row sums of exp(x - max), reading the input a second time.
extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
math_rewrite_row_sumexp(const float* __restrict__ x, const float* __restrict__ row_max,
                        float* __restrict__ row_sum, int cols) {
    __shared__ float red[32];
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)blockIdx.x * cols);
    const float m = row_max[blockIdx.x];
    float s = 0.0f;
    for (int i = threadIdx.x; i < cols / 4; i += SOFTMAX_THREADS) {
        float4 v = xr[i];
        s += (expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m));
    }
    s = softmax_block_sum(s, red);
    if (threadIdx.x == 0) row_sum[blockIdx.x] = s;
}

// Pass 3: normalize, reading the input a third time and writing the output.
extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
math_rewrite_row_normalize(const float* __restrict__ x, const float* __restrict__ row_max,
                           const float* __restrict__ row_sum, float* __restrict__ y, int cols) {
    const size_t base = (size_t)blockIdx.x * cols;
    const float4* xr = reinterpret_cast<const float4*>(x + base);
    float4* yr = reinterpret_cast<float4*>(y + base);
    const float m = row_max[blockIdx.x];
    const float inv = 1.0f / row_sum[blockIdx.x];
    for (int i = threadIdx.x; i < cols / 4; i += SOFTMAX_THREADS) {
        float4 v = xr[i];
        yr[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv,
                            expf(v.w - m) * inv);
    }
}

// ---- Good: online softmax. One pass keeps a running maximum m and a running sum s of
// exp(x - m); when m grows, the old sum is rescaled by exp(m_old - m_new). Partial (m, s) pairs
// merge with the same rule, so the block reduction works on pairs. A second pass normalizes;
// its re-read of the row (32 KB for 8192 columns) is served by the L2 cache, not DRAM.

__device__ __forceinline__ void softmax_merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
math_rewrite_online_softmax(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red_m[32];
    __shared__ float red_s[32];
    const size_t base = (size_t)blockIdx.x * cols;
    const float4* xr = reinterpret_cast<const float4*>(x + base);
    float4* yr = reinterpret_cast<float4*>(y + base);

    float m = softmax_neg_inf();
    float s = 0.0f;
    for (int i = threadIdx.x; i < cols / 4; i += SOFTMAX_THREADS) {
        float4 v = xr[i];
        float mn = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        // exp(-inf) = 0 handles the first iteration, where m is still -inf.
        s = s * expf(m - mn) + (expf(v.x - mn) + expf(v.y - mn)) + (expf(v.z - mn) + expf(v.w - mn));
        m = mn;
    }
    // Warp-level merge of (m, s) pairs, then across the 8 warps through shared memory.
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        softmax_merge(m, s, m2, s2);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        red_m[warp] = m;
        red_s[warp] = s;
    }
    __syncthreads();
    if (lane < SOFTMAX_THREADS / 32) {
        m = red_m[lane];
        s = red_s[lane];
    } else {
        m = softmax_neg_inf();
        s = 0.0f;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        // Lanes beyond the 8 warps carry (-inf, 0); skip them so exp(-inf - -inf) = NaN never
        // appears.
        if (m2 != softmax_neg_inf()) softmax_merge(m, s, m2, s2);
    }
    const float inv = 1.0f / s;
    for (int i = threadIdx.x; i < cols / 4; i += SOFTMAX_THREADS) {
        float4 v = xr[i];
        yr[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv,
                            expf(v.w - m) * inv);
    }
}
