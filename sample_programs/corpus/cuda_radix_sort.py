"""LSD radix sort of 16M uint32 keys in CuPy raw kernels, next to ``cupy.sort``.

Four passes of 8 bits. Each pass: a histogram kernel in which every block counts the digits of
its tile of 4096 keys straight into its own 256 counters in global memory (one global
``atomicAdd`` per key), stored digit-major (``counts[digit * n_tiles + tile]``); an exclusive
scan of those 256 x 4096 counts with ``cupy.cumsum`` (so that every tile knows where its keys
of each digit go); and a scatter kernel that walks its tile again in rounds of 256 keys,
ranks equal digits within a warp with ``__match_any_sync``, combines the warps through
shared memory to keep the sort stable, and writes each key to its place. Keys ping-pong
between two buffers. ``cupy.sort`` (CUB radix sort) of the same keys is the library control,
and the two results must agree.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

RADIX_SRC = r"""
#define RADIX 256
#define THREADS 256                 // == RADIX: thread d looks after digit d
#define WARPS (THREADS / 32)
#define ITEMS 16
#define TILE (THREADS * ITEMS)

extern "C" __global__ void digit_histogram(const unsigned int* __restrict__ keys,
                                           unsigned int* __restrict__ counts,
                                           int n, int shift, int n_tiles)
{
    size_t base = (size_t)blockIdx.x * TILE;
    for (int r = 0; r < ITEMS; ++r) {
        size_t i = base + (size_t)r * THREADS + threadIdx.x;
        if (i < (size_t)n) {
            unsigned int d = (keys[i] >> shift) & (RADIX - 1);
            atomicAdd(&counts[d * n_tiles + blockIdx.x], 1u);
        }
    }
}

extern "C" __global__ void digit_scatter(const unsigned int* __restrict__ keys_in,
                                         unsigned int* __restrict__ keys_out,
                                         const unsigned int* __restrict__ offsets,
                                         int n, int shift, int n_tiles)
{
    __shared__ unsigned int next_pos[RADIX];          // where this tile's next key of digit d goes
    __shared__ unsigned int warp_count[WARPS][RADIX]; // keys of digit d per warp, this round
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    next_pos[tid] = offsets[tid * n_tiles + blockIdx.x];
    size_t base = (size_t)blockIdx.x * TILE;

    for (int r = 0; r < ITEMS; ++r) {
        for (int w = 0; w < WARPS; ++w) warp_count[w][tid] = 0;
        __syncthreads();

        size_t i = base + (size_t)r * THREADS + tid;
        bool valid = i < (size_t)n;
        unsigned int key = valid ? keys_in[i] : 0u;
        unsigned int d = (key >> shift) & (RADIX - 1);
        // lanes holding the same digit (invalid lanes form their own group)
        unsigned int peers = __match_any_sync(0xffffffffu, valid ? d : 0xffffffffu);
        unsigned int rank = __popc(peers & ((1u << lane) - 1u));
        if (valid && rank == 0) warp_count[warp][d] = __popc(peers);
        __syncthreads();

        // thread tid turns the per-warp counts of digit tid into exclusive prefixes
        unsigned int total = 0;
        for (int w = 0; w < WARPS; ++w) {
            unsigned int c = warp_count[w][tid];
            warp_count[w][tid] = total;
            total += c;
        }
        __syncthreads();

        if (valid) keys_out[next_pos[d] + warp_count[warp][d] + rank] = key;
        __syncthreads();
        next_pos[tid] += total;
    }
}
"""

N, RADIX, THREADS, ITEMS = 1 << 24, 256, 256, 16
TILE = THREADS * ITEMS


def main():
    args = parser(__doc__).parse_args()
    import cupy as cp

    mod = cp.RawModule(code=RADIX_SRC)
    k_hist = mod.get_function("digit_histogram")
    k_scatter = mod.get_function("digit_scatter")
    n_tiles = (N + TILE - 1) // TILE
    cp.random.seed(5)
    keys = cp.random.randint(0, 2**32, size=N, dtype=cp.uint32)
    buf = [cp.empty(N, cp.uint32), cp.empty(N, cp.uint32)]
    counts = cp.empty(RADIX * n_tiles, cp.uint32)
    out = {}

    def radix_sort(src):
        for p in range(4):
            shift = 8 * p
            dst = buf[p % 2]
            counts.fill(0)
            k_hist((n_tiles,), (THREADS,),
                   (src, counts, np.int32(N), np.int32(shift), np.int32(n_tiles)))
            offsets = cp.cumsum(counts, dtype=cp.uint32) - counts      # exclusive scan
            k_scatter((n_tiles,), (THREADS,),
                      (src, dst, offsets, np.int32(N), np.int32(shift), np.int32(n_tiles)))
            src = dst
        return src

    def step():
        out["radix"] = radix_sort(keys)
        out["cub"] = cp.sort(keys)

    def check():
        if not bool((out["radix"] == out["cub"]).all()):
            bad = int((out["radix"] != out["cub"]).sum())
            raise AssertionError(f"radix sort differs from cupy.sort at {bad} positions")
        if not bool((out["cub"][1:] >= out["cub"][:-1]).all()):
            raise AssertionError("cupy.sort result not ascending")

    run(step, name="cuda_radix_sort", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
