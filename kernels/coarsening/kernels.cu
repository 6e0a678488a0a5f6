// Coarsening demo: c = a + b over a large float array, three ways.

// Bad: one scalar element per thread over a huge grid. Every thread pays the index math,
// the bounds check and three 4-byte memory instructions for 4 bytes of output.
extern "C" __global__ void coarsening_add_scalar(const float* __restrict__ a,
                                                 const float* __restrict__ b,
                                                 float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

// Good: 16-byte vector accesses and a grid-stride loop over a grid sized to the machine (32 blocks
// per SM), so each thread handles about a dozen float4s and issues a quarter of the memory
// instructions per byte.
extern "C" __global__ void coarsening_add_float4(const float4* __restrict__ a,
                                                 const float4* __restrict__ b,
                                                 float4* __restrict__ c, int n4) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 x = a[i];
        float4 y = b[i];
        c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}

// Extra: float3 is 12 bytes with 4-byte alignment, and there is no 12-byte load, so each float3
// access becomes three scalar accesses whose lanes sit 12 bytes apart (partly used sectors per
// instruction, three times the instruction count of the scalar kernel per element).
extern "C" __global__ void coarsening_add_float3(const float3* __restrict__ a,
                                                 const float3* __restrict__ b,
                                                 float3* __restrict__ c, int n3) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n3) {
        float3 x = a[i];
        float3 y = b[i];
        c[i] = make_float3(x.x + y.x, x.y + y.y, x.z + y.z);
    }
}
