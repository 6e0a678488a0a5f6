// Precision demo: out = a * x + y over a large array, stored and computed in fp32 or fp16.
#include <cuda_fp16.h>

// Bad: fp32 storage and math. 12 bytes of DRAM traffic per element (read x, read y, write out).
extern "C" __global__ void precision_axpy_fp32(const float4* __restrict__ x,
                                               const float4* __restrict__ y,
                                               float4* __restrict__ out, float a, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 u = x[i];
        float4 v = y[i];
        out[i] = make_float4(fmaf(a, u.x, v.x), fmaf(a, u.y, v.y), fmaf(a, u.z, v.z),
                             fmaf(a, u.w, v.w));
    }
}

// Good: fp16 storage and packed half2 math (one HFMA2 does two fused multiply-adds).
// 6 bytes per element. Each thread moves 8 halves through one 16-byte access per array.
extern "C" __global__ void precision_axpy_half2(const uint4* __restrict__ x,
                                                const uint4* __restrict__ y,
                                                uint4* __restrict__ out, float a, int n8) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n8) {
        uint4 u = x[i];
        uint4 v = y[i];
        const __half2 a2 = __float2half2_rn(a);
        const __half2* hu = reinterpret_cast<const __half2*>(&u);
        const __half2* hv = reinterpret_cast<const __half2*>(&v);
        uint4 r;
        __half2* hr = reinterpret_cast<__half2*>(&r);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            hr[k] = __hfma2(a2, hu[k], hv[k]);
        }
        out[i] = r;
    }
}
