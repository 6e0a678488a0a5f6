"""Stream compaction of 64M float32 samples in hand-written CUDA kernels, next to CuPy's.

A detector-style buffer of 2^26 float32 samples (standard normal noise with a sprinkling of
positive pulses) is filtered: every sample above the threshold 1.5 (about 7 % of them,
~4.6M) is copied to an output buffer of values, with its int32 position in a second buffer.
The output buffers are allocated once at full size; the number kept stays on the device.

Three ways in one step (``cupy.RawModule``, 256-thread blocks):

- single pass, one thread per sample: each kept sample takes its output slot from one
  global counter with ``atomicAdd(count, 1)`` and writes its value and position there (the
  order of the output is whatever order the atomics happen in);
- two passes over tiles of 4096 samples (16 per thread, block-strided): a counting kernel
  (``__syncthreads_count`` per round) writes the number kept per tile, CuPy turns those 16384
  counts into exclusive offsets (``cupy.cumsum`` minus the counts), and a scatter kernel
  reads each tile again and writes its kept samples in input order (warp ballots, population
  counts and per-warp prefixes in shared memory);
- the CuPy control: ``x[x > threshold]`` and ``cupy.flatnonzero`` of the same mask.

``--tile-atomic`` replaces the single-pass kernel by one that reserves each tile's output
range with a single ``atomicAdd`` of the tile's count (ballots per round, a shared-memory
prefix over the tile's warps and rounds, samples held in registers between the two).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

N = 1 << 26
THRESHOLD = 1.5
THREADS = 256
ITEMS = 16
TILE = THREADS * ITEMS

COMPACT_SRC = r"""
#define THREADS 256
#define ITEMS 16
#define TILE (THREADS * ITEMS)
#define WARPS (THREADS / 32)

extern "C" __global__ void compact_atomic(const float* __restrict__ x, int n, float threshold,
                                          float* __restrict__ out_val,
                                          int* __restrict__ out_idx, int* __restrict__ count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v > threshold) {
        int pos = atomicAdd(count, 1);
        out_val[pos] = v;
        out_idx[pos] = i;
    }
}

// one atomicAdd per tile of TILE samples; within a tile the output keeps the input order
extern "C" __global__ void compact_tile_atomic(const float* __restrict__ x, int n,
                                               float threshold, float* __restrict__ out_val,
                                               int* __restrict__ out_idx,
                                               int* __restrict__ count)
{
    __shared__ int prefix[ITEMS][WARPS];
    __shared__ int tile_base;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int base = blockIdx.x * TILE;
    float v[ITEMS];
    unsigned int kept[ITEMS];
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
        int i = base + r * THREADS + tid;
        v[r] = i < n ? x[i] : 0.0f;
        kept[r] = __ballot_sync(0xffffffffu, i < n && v[r] > threshold);
        if (lane == 0) prefix[r][warp] = __popc(kept[r]);
    }
    __syncthreads();
    if (tid == 0) {
        int sum = 0;
        for (int r = 0; r < ITEMS; ++r)
            for (int w = 0; w < WARPS; ++w) {
                int c = prefix[r][w];
                prefix[r][w] = sum;
                sum += c;
            }
        tile_base = atomicAdd(count, sum);
    }
    __syncthreads();
    unsigned int lower = (1u << lane) - 1u;
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
        if ((kept[r] >> lane) & 1u) {
            int pos = tile_base + prefix[r][warp] + __popc(kept[r] & lower);
            out_val[pos] = v[r];
            out_idx[pos] = base + r * THREADS + tid;
        }
    }
}

extern "C" __global__ void count_tiles(const float* __restrict__ x, int n, float threshold,
                                       int* __restrict__ tile_count)
{
    int base = blockIdx.x * TILE;
    int total = 0;
    for (int r = 0; r < ITEMS; ++r) {
        int i = base + r * THREADS + threadIdx.x;
        total += __syncthreads_count(i < n && x[i] > threshold);
    }
    if (threadIdx.x == 0) tile_count[blockIdx.x] = total;
}

extern "C" __global__ void scatter_tiles(const float* __restrict__ x, int n, float threshold,
                                         const int* __restrict__ tile_offset,
                                         float* __restrict__ out_val,
                                         int* __restrict__ out_idx)
{
    __shared__ int warp_prefix[WARPS];
    __shared__ int round_total;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int base = blockIdx.x * TILE;
    int next = tile_offset[blockIdx.x];
    unsigned int lower = (1u << lane) - 1u;
    for (int r = 0; r < ITEMS; ++r) {
        int i = base + r * THREADS + tid;
        float v = i < n ? x[i] : 0.0f;
        bool keep = i < n && v > threshold;
        unsigned int kept = __ballot_sync(0xffffffffu, keep);
        if (lane == 0) warp_prefix[warp] = __popc(kept);
        __syncthreads();
        if (tid == 0) {
            int sum = 0;
            for (int w = 0; w < WARPS; ++w) {
                int c = warp_prefix[w];
                warp_prefix[w] = sum;
                sum += c;
            }
            round_total = sum;
        }
        __syncthreads();
        if (keep) {
            int pos = next + warp_prefix[warp] + __popc(kept & lower);
            out_val[pos] = v;
            out_idx[pos] = i;
        }
        next += round_total;
        __syncthreads();                    // warp_prefix is rewritten next round
    }
}
"""


def main():
    p = parser(__doc__)
    p.add_argument("--tile-atomic", action="store_true",
                   help="single pass with one atomicAdd per 4096-sample tile")
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=COMPACT_SRC)
    compact_atomic = mod.get_function("compact_atomic")
    compact_tile_atomic = mod.get_function("compact_tile_atomic")
    count_tiles = mod.get_function("count_tiles")
    scatter_tiles = mod.get_function("scatter_tiles")

    cp.random.seed(3)
    x = cp.random.standard_normal(N, dtype=cp.float32)
    pulses = cp.random.random(N, dtype=cp.float32) < 0.002
    x += pulses * cp.random.exponential(4.0, N, dtype=cp.float32)
    del pulses
    n_tiles = (N + TILE - 1) // TILE
    thr = np.float32(THRESHOLD)

    # output buffers sized for the worst case; the counts stay on the device
    a_val = cp.empty(N, cp.float32)
    a_idx = cp.empty(N, cp.int32)
    a_count = cp.zeros(1, cp.int32)
    s_val = cp.empty(N, cp.float32)
    s_idx = cp.empty(N, cp.int32)
    tile_count = cp.empty(n_tiles, cp.int32)
    out = {}

    def step():
        a_count.fill(0)
        if args.tile_atomic:
            compact_tile_atomic((n_tiles,), (THREADS,),
                                (x, np.int32(N), thr, a_val, a_idx, a_count))
        else:
            compact_atomic(((N + THREADS - 1) // THREADS,), (THREADS,),
                           (x, np.int32(N), thr, a_val, a_idx, a_count))

        count_tiles((n_tiles,), (THREADS,), (x, np.int32(N), thr, tile_count))
        tile_offset = cp.cumsum(tile_count, dtype=cp.int32) - tile_count
        scatter_tiles((n_tiles,), (THREADS,),
                      (x, np.int32(N), thr, tile_offset, s_val, s_idx))
        s_total = tile_offset[-1] + tile_count[-1]

        mask = x > THRESHOLD
        ref_val = x[mask]
        ref_idx = cp.flatnonzero(mask)
        out.update(s_total=s_total, ref_val=ref_val, ref_idx=ref_idx)

    def check():
        ref_val, ref_idx = out["ref_val"], out["ref_idx"]
        n_keep = int(ref_idx.size)
        host_n = int(np.count_nonzero(x.get() > thr))
        if n_keep != host_n:
            raise AssertionError(f"cupy mask kept {n_keep}, NumPy counts {host_n}")
        if not bool(cp.all(x[ref_idx] == ref_val)):
            raise AssertionError("cupy mask values and positions disagree")
        # two-pass: same elements in the same order as the mask
        if int(out["s_total"]) != n_keep:
            raise AssertionError(f"two-pass total {int(out['s_total'])}, expected {n_keep}")
        if not (bool(cp.all(s_idx[:n_keep] == ref_idx.astype(cp.int32)))
                and bool(cp.all(s_val[:n_keep] == ref_val))):
            raise AssertionError("two-pass output differs from x[x > threshold]")
        # atomic: same elements, order free
        if int(a_count[0]) != n_keep:
            raise AssertionError(f"atomic count {int(a_count[0])}, expected {n_keep}")
        got_idx = a_idx[:n_keep]
        if not bool(cp.all(x[got_idx] == a_val[:n_keep])):
            raise AssertionError("atomic output: values do not match their positions")
        if not bool(cp.all(cp.sort(got_idx) == ref_idx.astype(cp.int32))):
            raise AssertionError("atomic output: positions differ from the mask's")

    run(step, name="cuda_stream_compaction", backend="cupy", args=args,
        variant="tile_atomic" if args.tile_atomic else "baseline", check=check)


if __name__ == "__main__":
    main()
