"""Parallel reduction ladder: the sum of 2^25 floats, five ways.

The classic sequence of block-level reductions, from interleaved addressing with a modulo
up to a grid-stride kernel with float4 loads and warp shuffles. Every version writes one
partial sum per block; a final cp.sum over the partials gives the total.
Block size 256 throughout.
"""

import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run
import cupy as cp

BLOCK = 256

# v1: interleaved addressing, the active threads chosen with a modulo.
REDUCE_V1 = r"""
extern "C" __global__ void reduce_v1(const float* __restrict__ in, float* __restrict__ out, int n)
{
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();

    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""

# v2: interleaved addressing, strided index instead of the modulo (no divergent branch
# inside a warp, but strided shared-memory access).
REDUCE_V2 = r"""
extern "C" __global__ void reduce_v2(const float* __restrict__ in, float* __restrict__ out, int n)
{
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();

    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        int index = 2 * s * tid;
        if (index < blockDim.x)
            sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""

# v3: sequential addressing, the active half of the block shrinks each step.
REDUCE_V3 = r"""
extern "C" __global__ void reduce_v3(const float* __restrict__ in, float* __restrict__ out, int n)
{
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();

    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""

# v4: first add during the global load; each block covers 2*blockDim.x elements.
REDUCE_V4 = r"""
extern "C" __global__ void reduce_v4(const float* __restrict__ in, float* __restrict__ out, int n)
{
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    float v = (i < n) ? in[i] : 0.0f;
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();

    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""

# v5: fixed grid, grid-stride loop over float4, warp-shuffle reduction, one shared
# slot per warp.
REDUCE_V5 = r"""
extern "C" __global__ void reduce_v5(const float* __restrict__ in, float* __restrict__ out, int n)
{
    __shared__ float warp_sums[32];
    const float4* in4 = reinterpret_cast<const float4*>(in);
    int n4 = n >> 2;
    int stride = gridDim.x * blockDim.x;
    int gid = blockIdx.x * blockDim.x + threadIdx.x;

    float sum = 0.0f;
    for (int i = gid; i < n4; i += stride) {
        float4 v = in4[i];
        sum += (v.x + v.y) + (v.z + v.w);
    }
    for (int i = (n4 << 2) + gid; i < n; i += stride)   // tail when n % 4 != 0
        sum += in[i];

    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_down_sync(0xffffffffu, sum, off);

    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();

    if (warp == 0) {
        sum = (lane < (blockDim.x >> 5)) ? warp_sums[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1)
            sum += __shfl_down_sync(0xffffffffu, sum, off);
        if (lane == 0) out[blockIdx.x] = sum;
    }
}
"""

args = parser(__doc__).parse_args()

N = 1 << 25
cp.random.seed(0)
x = cp.random.random_sample(N, dtype=cp.float32)

kernels = {
    "v1": cp.RawKernel(REDUCE_V1, "reduce_v1"),
    "v2": cp.RawKernel(REDUCE_V2, "reduce_v2"),
    "v3": cp.RawKernel(REDUCE_V3, "reduce_v3"),
    "v4": cp.RawKernel(REDUCE_V4, "reduce_v4"),
    "v5": cp.RawKernel(REDUCE_V5, "reduce_v5"),
}
grids = {
    "v1": (N + BLOCK - 1) // BLOCK,
    "v2": (N + BLOCK - 1) // BLOCK,
    "v3": (N + BLOCK - 1) // BLOCK,
    "v4": (N + 2 * BLOCK - 1) // (2 * BLOCK),
    "v5": 132 * 8,
}
partials = {k: cp.empty(g, dtype=cp.float32) for k, g in grids.items()}
totals = {}


def step():
    for k, kern in kernels.items():
        kern((grids[k],), (BLOCK,), (x, partials[k], cp.int32(N)))
        totals[k] = cp.sum(partials[k])


def check():
    ref = float(cp.sum(x, dtype=cp.float64))
    for k, t in totals.items():
        got = float(t)
        if abs(got - ref) > 1e-4 * abs(ref):
            raise AssertionError(f"reduce_{k}: sum {got} != reference {ref}")


run(step, name="cuda_reduction", backend="cupy", args=args, check=check)
