// Tiling demo: C = A * B for row-major fp32 matrices (A: M x K, B: K x N, C: M x N).

// Bad: one thread per element of C, every operand fetched from global memory. Each element of A
// and B is requested by many threads (N and M times in total); the caches absorb part of that,
// but the kernel is limited by L1/L2 load traffic, not by arithmetic.
// Launch: block (32, 8), grid (N / 32, M / 8).
extern "C" __global__ void tiling_naive_matmul(const float* __restrict__ A,
                                               const float* __restrict__ B,
                                               float* __restrict__ C, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc = fmaf(A[row * K + k], B[k * N + col], acc);
        }
        C[row * N + col] = acc;
    }
}

// Good: a 64 x 64 tile of C per block of 256 threads. The block stages 64 x 16 slices of A and
// 16 x 64 slices of B in shared memory, so each value fetched from global memory is reused 64
// times, and each thread keeps a 4 x 4 sub-tile of C in registers, so each value read from shared
// memory feeds 4 FMAs. Requires M, N multiples of 64 and K a multiple of 16.
// Launch: block 256 threads (1-D), grid (N / 64, M / 64).
#define TILE_M 64
#define TILE_N 64
#define TILE_K 16

extern "C" __global__ void __launch_bounds__(256)
tiling_smem_matmul(const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C, int M, int N, int K) {
    // A is stored transposed (k-major) so a thread reads 4 consecutive rows with one 16-byte
    // shared load; +4 floats of padding keep the transposed stores from all hitting one bank.
    __shared__ __align__(16) float As[TILE_K][TILE_M + 4];
    __shared__ __align__(16) float Bs[TILE_K][TILE_N];

    const int tid = threadIdx.x;
    const int tx = tid % 16;  // column group: C columns 4*tx .. 4*tx+3 of the tile
    const int ty = tid / 16;  // row group: C rows 4*ty .. 4*ty+3 of the tile
    const int row0 = blockIdx.y * TILE_M;
    const int col0 = blockIdx.x * TILE_N;

    // Global-load assignment: A tile is 64 rows x 16 k (4 floats per thread),
    // B tile is 16 k x 64 cols (4 floats per thread).
    const int a_row = tid / 4, a_k = (tid % 4) * 4;
    const int b_k = tid / 16, b_col = (tid % 16) * 4;

    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        float4 av = *reinterpret_cast<const float4*>(&A[(row0 + a_row) * K + k0 + a_k]);
        As[a_k + 0][a_row] = av.x;
        As[a_k + 1][a_row] = av.y;
        As[a_k + 2][a_row] = av.z;
        As[a_k + 3][a_row] = av.w;
        *reinterpret_cast<float4*>(&Bs[b_k][b_col]) =
            *reinterpret_cast<const float4*>(&B[(k0 + b_k) * N + col0 + b_col]);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_K; ++k) {
            float4 a = *reinterpret_cast<const float4*>(&As[k][4 * ty]);
            float4 b = *reinterpret_cast<const float4*>(&Bs[k][4 * tx]);
            float ar[4] = {a.x, a.y, a.z, a.w};
            float br[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        *reinterpret_cast<float4*>(&C[(row0 + 4 * ty + i) * N + col0 + 4 * tx]) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
}
