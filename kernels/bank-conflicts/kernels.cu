// Bank-conflicts demo: out = in^T for a square row-major float matrix (side a multiple of 32),
// through a 32 x 32 shared-memory tile. Launch: block (32, 8), grid (side / 32, side / 32).
// Global reads and writes are coalesced in both kernels; only the shared tile layout differs.

#define BC_TILE 32
#define BC_ROWS 8

// Bad: tile[32][32]. Writing the tile row-wise is conflict-free, but reading it column-wise puts
// the 32 lanes of a warp at addresses 32 floats apart, which all map to the same bank: a 32-way
// conflict, so each shared load is replayed as 32 wavefronts.
extern "C" __global__ void bank_conflicts_transpose_unpadded(const float* __restrict__ in,
                                                             float* __restrict__ out, int side) {
    __shared__ float tile[BC_TILE][BC_TILE];
    int x = blockIdx.x * BC_TILE + threadIdx.x;
    int y = blockIdx.y * BC_TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < BC_TILE; j += BC_ROWS) {
        tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * side + x];
    }
    __syncthreads();
    x = blockIdx.y * BC_TILE + threadIdx.x;
    y = blockIdx.x * BC_TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < BC_TILE; j += BC_ROWS) {
        out[(size_t)(y + j) * side + x] = tile[threadIdx.x][threadIdx.y + j];
    }
}

// Good: tile[32][33]. One float of padding per row shifts each row by one bank, so a column of the
// tile spreads over all 32 banks and the column-wise read is a single wavefront.
extern "C" __global__ void bank_conflicts_transpose_padded(const float* __restrict__ in,
                                                           float* __restrict__ out, int side) {
    __shared__ float tile[BC_TILE][BC_TILE + 1];
    int x = blockIdx.x * BC_TILE + threadIdx.x;
    int y = blockIdx.y * BC_TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < BC_TILE; j += BC_ROWS) {
        tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * side + x];
    }
    __syncthreads();
    x = blockIdx.y * BC_TILE + threadIdx.x;
    y = blockIdx.x * BC_TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < BC_TILE; j += BC_ROWS) {
        out[(size_t)(y + j) * side + x] = tile[threadIdx.x][threadIdx.y + j];
    }
}
