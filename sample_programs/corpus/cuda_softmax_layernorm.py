"""Row softmax and LayerNorm forward in CuPy raw kernels, float32.

Softmax over rows of a 16384 x 1024 matrix with one thread per row (three passes over the
row: max, sum of exponentials, write) and with one block per row (block-wide max and sum
through warp shuffles); the block-per-row kernel also on a short, wide 64 x 32768 matrix
(attention over a long context for a few queries). LayerNorm forward with learned scale and
shift over 4096 rows of 8192 (mean, then variance, then the normalised write, each a pass
over the row with a shared-memory tree reduction in a 1024-thread block), and over 16384
rows of 1024 with one warp per row holding the row in registers.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

SOFTMAX_SRC = r"""
extern "C" __global__ void softmax_rows_thread(const float* __restrict__ x,
                                               float* __restrict__ y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    float m = -3.402823466e+38f;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    float inv = 1.0f / s;
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) * inv;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One block per row; blockDim.x is a multiple of 32, at most 1024.
extern "C" __global__ void softmax_rows_block(const float* __restrict__ x,
                                              float* __restrict__ y, int cols)
{
    __shared__ float red[32];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;

    float m = -3.402823466e+38f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = warp_max(m);
    if (lane == 0) red[wid] = m;
    __syncthreads();
    m = (lane < nw) ? red[lane] : -3.402823466e+38f;
    m = warp_max(m);
    __syncthreads();

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
    s = warp_sum(s);
    if (lane == 0) red[wid] = s;
    __syncthreads();
    s = (lane < nw) ? red[lane] : 0.0f;
    s = warp_sum(s);

    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - m) * inv;
}
"""

LAYERNORM_SRC = r"""
#define LN_THREADS 1024

__device__ float block_sum(float v, float* sdata)
{
    sdata[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sdata[threadIdx.x] += sdata[threadIdx.x + s];
        __syncthreads();
    }
    float total = sdata[0];
    __syncthreads();
    return total;
}

// One block of LN_THREADS per row.
extern "C" __global__ void layernorm_fwd_block(const float* __restrict__ x,
                                               const float* __restrict__ gamma,
                                               const float* __restrict__ beta,
                                               float* __restrict__ y, float* __restrict__ mean_out,
                                               float* __restrict__ rstd_out, int cols, float eps)
{
    __shared__ float sdata[LN_THREADS];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    float mean = block_sum(s, sdata) / cols;

    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = xr[c] - mean;
        v += d * d;
    }
    float var = block_sum(v, sdata) / cols;
    float rstd = rsqrtf(var + eps);

    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
    if (threadIdx.x == 0) {
        mean_out[blockIdx.x] = mean;
        rstd_out[blockIdx.x] = rstd;
    }
}

// One warp per row of exactly COLS floats, kept in registers (COLS / 32 per lane).
#define COLS 1024
#define PER_LANE (COLS / 32)

extern "C" __global__ void layernorm_fwd_warp1024(const float* __restrict__ x,
                                                  const float* __restrict__ gamma,
                                                  const float* __restrict__ beta,
                                                  float* __restrict__ y, int rows, float eps)
{
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)row * COLS);
    float4 v[PER_LANE / 4];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER_LANE / 4; ++k) {
        v[k] = xr[k * 32 + lane];
        s += v[k].x + v[k].y + v[k].z + v[k].w;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float mean = s / COLS;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < PER_LANE / 4; ++k) {
        float a = v[k].x - mean, b = v[k].y - mean, c = v[k].z - mean, d = v[k].w - mean;
        q += a * a + b * b + c * c + d * d;
    }
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    float rstd = rsqrtf(q / COLS + eps);
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)row * COLS);
#pragma unroll
    for (int k = 0; k < PER_LANE / 4; ++k) {
        float4 g = g4[k * 32 + lane], b = b4[k * 32 + lane], o;
        o.x = (v[k].x - mean) * rstd * g.x + b.x;
        o.y = (v[k].y - mean) * rstd * g.y + b.y;
        o.z = (v[k].z - mean) * rstd * g.z + b.z;
        o.w = (v[k].w - mean) * rstd * g.w + b.w;
        yr[k * 32 + lane] = o;
    }
}
"""

SM_ROWS, SM_COLS = 16384, 1024
WIDE_ROWS, WIDE_COLS = 64, 32768
LN_ROWS, LN_COLS = 4096, 8192
LNW_ROWS, LNW_COLS = 16384, 1024
EPS = 1e-5


def host_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def host_layernorm(x, g, b):
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * g + b


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp

    cp.random.seed(5)
    sm = cp.RawModule(code=SOFTMAX_SRC)
    softmax_thread = sm.get_function("softmax_rows_thread")
    softmax_block = sm.get_function("softmax_rows_block")
    ln = cp.RawModule(code=LAYERNORM_SRC)
    ln_block = ln.get_function("layernorm_fwd_block")
    ln_warp = ln.get_function("layernorm_fwd_warp1024")

    logits = cp.random.standard_normal((SM_ROWS, SM_COLS), dtype=cp.float32) * 4
    probs_thread = cp.empty_like(logits)
    probs_block = cp.empty_like(logits)
    scores = cp.random.standard_normal((WIDE_ROWS, WIDE_COLS), dtype=cp.float32) * 4
    probs_wide = cp.empty_like(scores)

    h = cp.random.standard_normal((LN_ROWS, LN_COLS), dtype=cp.float32) * 2 + 0.3
    gamma = cp.random.random_sample(LN_COLS, dtype=cp.float32) + 0.5
    beta = cp.random.standard_normal(LN_COLS, dtype=cp.float32) * 0.1
    h_out = cp.empty_like(h)
    h_mean = cp.empty(LN_ROWS, cp.float32)
    h_rstd = cp.empty(LN_ROWS, cp.float32)
    hw = cp.random.standard_normal((LNW_ROWS, LNW_COLS), dtype=cp.float32) * 2 + 0.3
    gamma_w = cp.random.random_sample(LNW_COLS, dtype=cp.float32) + 0.5
    beta_w = cp.random.standard_normal(LNW_COLS, dtype=cp.float32) * 0.1
    hw_out = cp.empty_like(hw)

    def step():
        softmax_thread(((SM_ROWS + 127) // 128,), (128,),
                       (logits, probs_thread, cp.int32(SM_ROWS), cp.int32(SM_COLS)))
        softmax_block((SM_ROWS,), (256,), (logits, probs_block, cp.int32(SM_COLS)))
        softmax_block((WIDE_ROWS,), (1024,), (scores, probs_wide, cp.int32(WIDE_COLS)))
        ln_block((LN_ROWS,), (1024,), (h, gamma, beta, h_out, h_mean, h_rstd,
                                       cp.int32(LN_COLS), cp.float32(EPS)))
        ln_warp(((LNW_ROWS * 32 + 255) // 256,), (256,),
                (hw, gamma_w, beta_w, hw_out, cp.int32(LNW_ROWS), cp.float32(EPS)))

    def check():
        rows = slice(0, 512)
        ref = host_softmax(logits[rows].get())
        for name, got in (("softmax_rows_thread", probs_thread),
                          ("softmax_rows_block", probs_block)):
            err = np.abs(got[rows].get() - ref).max()
            if not err < 1e-5:
                raise AssertionError(f"{name}: max error {err:.3g}")
        err = np.abs(probs_wide.get() - host_softmax(scores.get())).max()
        if not err < 1e-5:
            raise AssertionError(f"softmax_rows_block (wide): max error {err:.3g}")
        ref = host_layernorm(h[:256].get(), gamma.get(), beta.get())
        err = np.abs(h_out[:256].get() - ref).max()
        if not err < 1e-3:
            raise AssertionError(f"layernorm_fwd_block: max error {err:.3g}")
        ref_mu = h[:256].get().astype(np.float64).mean(axis=1)
        if not np.abs(h_mean[:256].get() - ref_mu).max() < 1e-4:
            raise AssertionError("layernorm_fwd_block: mean differs")
        ref = host_layernorm(hw[:1024].get(), gamma_w.get(), beta_w.get())
        err = np.abs(hw_out[:1024].get() - ref).max()
        if not err < 1e-3:
            raise AssertionError(f"layernorm_fwd_warp1024: max error {err:.3g}")

    run(step, name="cuda_softmax_layernorm", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
