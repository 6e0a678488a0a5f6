// Fusion demo: y = relu(x * scale + shift) + x, as three kernels or as one.
// All kernels use 16-byte accesses and one float4 per thread, so each one runs near the DRAM roof
// on its own; the cost of the unfused chain is the intermediate arrays it writes and re-reads.

// Bad, step 1 of 3: t1 = x * scale + shift (reads x, writes t1).
extern "C" __global__ void fusion_scale_shift(const float4* __restrict__ x,
                                              float4* __restrict__ t1, float scale, float shift,
                                              int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        t1[i] = make_float4(fmaf(v.x, scale, shift), fmaf(v.y, scale, shift),
                            fmaf(v.z, scale, shift), fmaf(v.w, scale, shift));
    }
}

// Bad, step 2 of 3: t2 = relu(t1) (reads t1, writes t2).
extern "C" __global__ void fusion_relu(const float4* __restrict__ t1, float4* __restrict__ t2,
                                       int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = t1[i];
        t2[i] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f),
                            fmaxf(v.w, 0.0f));
    }
}

// Bad, step 3 of 3: y = t2 + x (reads t2 and x again, writes y).
extern "C" __global__ void fusion_add_residual(const float4* __restrict__ t2,
                                               const float4* __restrict__ x,
                                               float4* __restrict__ y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 a = t2[i];
        float4 b = x[i];
        y[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
}

// Good: the whole chain in registers. Reads x once and writes y once: 8 bytes per element
// instead of 28 for the three-kernel chain.
extern "C" __global__ void fusion_fused_scale_relu_residual(const float4* __restrict__ x,
                                                            float4* __restrict__ y, float scale,
                                                            float shift, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        float4 r;
        r.x = fmaxf(fmaf(v.x, scale, shift), 0.0f) + v.x;
        r.y = fmaxf(fmaf(v.y, scale, shift), 0.0f) + v.y;
        r.z = fmaxf(fmaf(v.z, scale, shift), 0.0f) + v.z;
        r.w = fmaxf(fmaf(v.w, scale, shift), 0.0f) + v.w;
        y[i] = r;
    }
}
