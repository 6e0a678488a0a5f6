"""Matrix transpose: out = in.T for an 8192 x 4096 float32 matrix (128 MB each way).

A plain copy of the same size gives the bandwidth to aim for; then a naive transpose,
a 32x32 shared-memory tile, the same tile padded to 33 columns, and the padded tile
with a 32x8 thread block where each thread moves four elements.
"""

import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run
import cupy as cp

TILE = 32
ROWS_PER_PASS = 8

# v0: straight copy, 32x8 threads per 32x32 tile, four elements per thread.
COPY = r"""
#define TILE 32
#define BLOCK_ROWS 8
extern "C" __global__ void copy_tile(const float* __restrict__ in, float* __restrict__ out,
                                     int rows, int cols)
{
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x >= cols) return;
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (y + j < rows)
            out[(size_t)(y + j) * cols + x] = in[(size_t)(y + j) * cols + x];
}
"""

# v1: one element per thread, read along a row of `in`, write down a column of `out`.
TRANSPOSE_NAIVE = r"""
extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out,
                                           int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;   // column of in
    int y = blockIdx.y * blockDim.y + threadIdx.y;   // row of in
    if (x < cols && y < rows)
        out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
}
"""

# v2: stage a 32x32 tile in shared memory so both the read and the write are row-wise.
TRANSPOSE_SMEM = r"""
#define TILE 32
extern "C" __global__ void transpose_smem(const float* __restrict__ in, float* __restrict__ out,
                                          int rows, int cols)
{
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows)
        tile[threadIdx.y][threadIdx.x] = in[(size_t)y * cols + x];
    __syncthreads();

    x = blockIdx.y * TILE + threadIdx.x;   // column of out
    y = blockIdx.x * TILE + threadIdx.y;   // row of out
    if (x < rows && y < cols)
        out[(size_t)y * rows + x] = tile[threadIdx.x][threadIdx.y];
}
"""

# v3: same as v2 with one extra column in the tile.
TRANSPOSE_SMEM_PAD = r"""
#define TILE 32
extern "C" __global__ void transpose_smem_pad(const float* __restrict__ in, float* __restrict__ out,
                                              int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows)
        tile[threadIdx.y][threadIdx.x] = in[(size_t)y * cols + x];
    __syncthreads();

    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < rows && y < cols)
        out[(size_t)y * rows + x] = tile[threadIdx.x][threadIdx.y];
}
"""

# v4: padded tile, 32x8 threads, each thread moves four elements of the 32x32 tile.
TRANSPOSE_SMEM_PAD_4 = r"""
#define TILE 32
#define BLOCK_ROWS 8
extern "C" __global__ void transpose_smem_pad_4(const float* __restrict__ in, float* __restrict__ out,
                                                int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    __syncthreads();

    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""

args = parser(__doc__).parse_args()

ROWS, COLS = 8192, 4096
cp.random.seed(0)
src = cp.random.random_sample((ROWS, COLS), dtype=cp.float32)
copied = cp.empty_like(src)
outs = {k: cp.empty((COLS, ROWS), dtype=cp.float32) for k in ("v1", "v2", "v3", "v4")}

copy_tile = cp.RawKernel(COPY, "copy_tile")
naive = cp.RawKernel(TRANSPOSE_NAIVE, "transpose_naive")
smem = cp.RawKernel(TRANSPOSE_SMEM, "transpose_smem")
smem_pad = cp.RawKernel(TRANSPOSE_SMEM_PAD, "transpose_smem_pad")
smem_pad_4 = cp.RawKernel(TRANSPOSE_SMEM_PAD_4, "transpose_smem_pad_4")

tiles = ((COLS + TILE - 1) // TILE, (ROWS + TILE - 1) // TILE)
shape = (cp.int32(ROWS), cp.int32(COLS))


def step():
    copy_tile(tiles, (TILE, ROWS_PER_PASS), (src, copied) + shape)
    naive(((COLS + 31) // 32, (ROWS + 7) // 8), (32, 8), (src, outs["v1"]) + shape)
    smem(tiles, (TILE, TILE), (src, outs["v2"]) + shape)
    smem_pad(tiles, (TILE, TILE), (src, outs["v3"]) + shape)
    smem_pad_4(tiles, (TILE, ROWS_PER_PASS), (src, outs["v4"]) + shape)


def check():
    if not bool(cp.array_equal(copied, src)):
        raise AssertionError("copy_tile: output differs from input")
    ref = src.T.copy()
    for k, o in outs.items():
        if not bool(cp.array_equal(o, ref)):
            bad = int(cp.count_nonzero(o != ref))
            raise AssertionError(f"transpose {k}: {bad} elements differ from in.T")


run(step, name="cuda_transpose", backend="cupy", args=args, check=check)
