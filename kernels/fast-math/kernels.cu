// Fast-math demo: y = sum_k [ sin(w_k x) * cos(u_k x) + 0.5 * exp(-s_k x^2) ] for k < 32,
// with inputs in [-1, 1] so every argument of sin/cos stays inside [-pi, pi]. 96 transcendental
// calls per element make both kernels compute-bound.

#define FM_TERMS 32

// Bad: the accurate library functions. sinf/cosf do a careful range reduction and a polynomial on
// the FMA pipe (tens of instructions each, plus a rarely taken slow path for huge arguments);
// expf adds range handling around the hardware exp2.
extern "C" __global__ void fast_math_accurate_trig(const float* __restrict__ x,
                                                   float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float acc = 0.0f;
#pragma unroll 4
        for (int k = 0; k < FM_TERMS; ++k) {
            float w = 0.5f + 0.08f * k, u = 1.0f - 0.02f * k, s = 0.25f + 0.05f * k;
            acc += sinf(w * v) * cosf(u * v) + 0.5f * expf(-s * v * v);
        }
        y[i] = acc;
    }
}

// Good: the hardware intrinsics. __sinf/__cosf/__expf map to one or two instructions on the
// special-function (XU) pipe. Absolute error of __sinf/__cosf is about 2^-21 on [-pi, pi];
// __expf has a small relative error that grows with |argument| (here |arg| <= 1.8).
extern "C" __global__ void fast_math_intrinsic_trig(const float* __restrict__ x,
                                                    float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float acc = 0.0f;
#pragma unroll 4
        for (int k = 0; k < FM_TERMS; ++k) {
            float w = 0.5f + 0.08f * k, u = 1.0f - 0.02f * k, s = 0.25f + 0.05f * k;
            acc += __sinf(w * v) * __cosf(u * v) + 0.5f * __expf(-s * v * v);
        }
        y[i] = acc;
    }
}
