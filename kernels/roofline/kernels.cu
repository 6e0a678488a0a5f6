// Roofline demo: the same affine recurrence evaluated two ways.
//
// Both kernels compute y = f^K(x) with f(v) = a*v + b, so both produce the same answer.
// The memory-bound kernel uses the closed form (one FMA per element: 2 FLOP per 8 bytes moved);
// the compute-bound kernel iterates the recurrence K times (2K FLOP per 8 bytes). The pair puts
// one kernel on each side of the ridge point, where arithmetic intensity decides the limiter.

// Number of FMAs per element in the compute-bound kernel; launch.py mirrors this value.
#define ROOFLINE_STEPS 256

// Memory-bound: y = A*x + B with the recurrence folded into (A, B) on the host.
// Arithmetic intensity = 2 FLOP / 8 bytes = 0.25 FLOP/byte, far left of the ridge (~14).
extern "C" __global__ void roofline_memory_bound_axpb(const float4* __restrict__ x,
                                                      float4* __restrict__ y, float a, float b,
                                                      int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        v.x = fmaf(a, v.x, b);
        v.y = fmaf(a, v.y, b);
        v.z = fmaf(a, v.z, b);
        v.w = fmaf(a, v.w, b);
        y[i] = v;
    }
}

// Compute-bound: iterate v = a*v + b ROOFLINE_STEPS times on each of the 4 lanes of a float4.
// The four components are independent chains, which gives each thread 4-way ILP so the FMA
// pipes stay busy. Intensity = 2*256 FLOP / 8 bytes = 64 FLOP/byte, right of the ridge.
extern "C" __global__ void roofline_compute_bound_poly(const float4* __restrict__ x,
                                                       float4* __restrict__ y, float a, float b,
                                                       int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
#pragma unroll 16
        for (int k = 0; k < ROOFLINE_STEPS; ++k) {
            v.x = fmaf(a, v.x, b);
            v.y = fmaf(a, v.y, b);
            v.z = fmaf(a, v.z, b);
            v.w = fmaf(a, v.w, b);
        }
        y[i] = v;
    }
}
