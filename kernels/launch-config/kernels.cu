// Launch-configuration demo: the same grid-stride kernel body launched with two grid shapes.

__device__ __forceinline__ void launch_config_scale_body(const float4* __restrict__ x,
                                                         float4* __restrict__ y, float a,
                                                         float b, int n4) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaf(a, v.x, b);
        v.y = fmaf(a, v.y, b);
        v.z = fmaf(a, v.z, b);
        v.w = fmaf(a, v.w, b);
        y[i] = v;
    }
}

// Bad: launched with 16 blocks of 256 threads. The grid-stride loop makes the result correct for
// any grid, which hides the problem: 116 of the 132 SMs of an H200 get no block at all.
extern "C" __global__ void launch_config_tiny_grid_scale(const float4* __restrict__ x,
                                                         float4* __restrict__ y, float a, float b,
                                                         int n4) {
    launch_config_scale_body(x, y, a, b, n4);
}

// Good: launched with 8 blocks of 256 threads per SM (one full wave at 100 % occupancy).
extern "C" __global__ void launch_config_full_grid_scale(const float4* __restrict__ x,
                                                         float4* __restrict__ y, float a, float b,
                                                         int n4) {
    launch_config_scale_body(x, y, a, b, n4);
}
