// Coalescing demo: copy a row-major R x C float array in two thread-to-data orders.
//
// Both kernels produce out == in. Each thread moves 4 floats, so both keep the same number of
// independent loads in flight; only the address pattern of a warp differs.

// Bad: threads walk the array column by column. Thread t copies elements q = 4t..4t+3 of the
// column-major order, i.e. element (row = q % R, col = q / R) at address row*C + col.
// Neighbouring lanes are 4*C floats apart (C = 32 -> 512 bytes), so every lane of a warp
// touches its own 32-byte sector and uses 4 bytes of it, for both the load and the store.
extern "C" __global__ void coalescing_strided_copy(const float* __restrict__ in,
                                                   float* __restrict__ out, int log2_rows,
                                                   int log2_cols, int n4) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n4) {
        return;
    }
    int rows_mask = (1 << log2_rows) - 1;
    float v[4];
    int e[4];
    // Issue the four loads before any store so both kernels keep 4 loads in flight per thread.
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        int q = 4 * t + k;
        e[k] = ((q & rows_mask) << log2_cols) | (q >> log2_rows);
        v[k] = in[e[k]];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        out[e[k]] = v[k];
    }
}

// Good: thread t copies the 16-byte chunk t. A warp reads and writes 512 contiguous bytes,
// i.e. 16 fully used sectors per request.
extern "C" __global__ void coalescing_contiguous_copy(const float4* __restrict__ in,
                                                      float4* __restrict__ out, int n4) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n4) {
        out[t] = in[t];
    }
}
