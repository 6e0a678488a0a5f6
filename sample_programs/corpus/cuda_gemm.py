"""SGEMM step by step: C = A @ B for 2048 x 2048 row-major FP32 matrices.

Two naive kernels (threadIdx.x along the rows of C, then along the columns), a 32x32
shared-memory tiled kernel, a register-tiled kernel (128x128 block tile, BK=8, an 8x8
micro-tile per thread) and cuBLAS through `a @ b` as the reference point.
"""

import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run
import cupy as cp

# v1: one thread per C element; threadIdx.x walks down the rows of C.
SGEMM_NAIVE_ROW = r"""
extern "C" __global__ void sgemm_naive_row(int M, int N, int K,
                                           const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           float* __restrict__ C)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
"""

# v2: same loop, threadIdx.x walks along the columns of C.
SGEMM_NAIVE_COL = r"""
extern "C" __global__ void sgemm_naive_col(int M, int N, int K,
                                           const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           float* __restrict__ C)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
"""

# v3: 32x32 tiles of A and B staged through shared memory, one output per thread.
SGEMM_SMEM = r"""
#define TILE 32
extern "C" __global__ void sgemm_smem_tiled(int M, int N, int K,
                                            const float* __restrict__ A,
                                            const float* __restrict__ B,
                                            float* __restrict__ C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""

# v4: 128x128 block tile, BK=8, 256 threads each accumulating an 8x8 micro-tile in
# registers. A is stored k-major in shared memory so both operands are read as rows.
# Requires M, N multiples of 128 and K a multiple of 8.
SGEMM_REG = r"""
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
extern "C" __global__ void __launch_bounds__(256)
sgemm_reg_tiled(int M, int N, int K,
                const float* __restrict__ A,
                const float* __restrict__ B,
                float* __restrict__ C)
{
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tRow = tid / (BN / TN);          // 0..15
    const int tCol = tid % (BN / TN);          // 0..15
    const int bRow = blockIdx.y * BM;
    const int bCol = blockIdx.x * BN;

    // global -> shared mapping: one float4 of A and one float4 of B per thread
    const int aRow = tid / (BK / 4);           // 0..127
    const int aCol = (tid % (BK / 4)) * 4;     // 0, 4
    const int bRowL = tid / (BN / 4);          // 0..7
    const int bColL = (tid % (BN / 4)) * 4;    // 0..124

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float ra[TM], rb[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        float4 a4 = *reinterpret_cast<const float4*>(&A[(bRow + aRow) * K + k0 + aCol]);
        As[aCol + 0][aRow] = a4.x;
        As[aCol + 1][aRow] = a4.y;
        As[aCol + 2][aRow] = a4.z;
        As[aCol + 3][aRow] = a4.w;
        *reinterpret_cast<float4*>(&Bs[bRowL][bColL]) =
            *reinterpret_cast<const float4*>(&B[(k0 + bRowL) * N + bCol + bColL]);
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                float4 v = *reinterpret_cast<const float4*>(&As[k][tRow * TM + i]);
                ra[i] = v.x; ra[i + 1] = v.y; ra[i + 2] = v.z; ra[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                float4 v = *reinterpret_cast<const float4*>(&Bs[k][tCol * TN + j]);
                rb[j] = v.x; rb[j + 1] = v.y; rb[j + 2] = v.z; rb[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        float* crow = &C[(bRow + tRow * TM + i) * N + bCol + tCol * TN];
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            *reinterpret_cast<float4*>(&crow[j]) =
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
    }
}
"""

args = parser(__doc__).parse_args()

M = N = K = 2048
assert M % 128 == 0 and N % 128 == 0 and K % 8 == 0

cp.random.seed(0)
a = cp.random.random_sample((M, K), dtype=cp.float32) * 2 - 1
b = cp.random.random_sample((K, N), dtype=cp.float32) * 2 - 1
outs = {k: cp.empty((M, N), dtype=cp.float32) for k in ("v1", "v2", "v3", "v4", "v5")}

naive_row = cp.RawKernel(SGEMM_NAIVE_ROW, "sgemm_naive_row")
naive_col = cp.RawKernel(SGEMM_NAIVE_COL, "sgemm_naive_col")
smem_tiled = cp.RawKernel(SGEMM_SMEM, "sgemm_smem_tiled")
reg_tiled = cp.RawKernel(SGEMM_REG, "sgemm_reg_tiled")
dims = (cp.int32(M), cp.int32(N), cp.int32(K))


def step():
    naive_row(((M + 31) // 32, (N + 31) // 32), (32, 32), dims + (a, b, outs["v1"]))
    naive_col(((N + 31) // 32, (M + 31) // 32), (32, 32), dims + (a, b, outs["v2"]))
    smem_tiled(((N + 31) // 32, (M + 31) // 32), (32, 32), dims + (a, b, outs["v3"]))
    reg_tiled((N // 128, M // 128), (256,), dims + (a, b, outs["v4"]))
    cp.matmul(a, b, out=outs["v5"])


def check():
    ref = cp.matmul(a, b)
    scale = float(cp.abs(ref).max())
    for k, c in outs.items():
        err = float(cp.abs(c - ref).max())
        if not bool(cp.allclose(c, ref, rtol=1e-3, atol=1e-3 * scale)):
            raise AssertionError(f"gemm {k}: max abs error {err} (max |C| {scale})")


run(step, name="cuda_gemm", backend="cupy", args=args, check=check)
