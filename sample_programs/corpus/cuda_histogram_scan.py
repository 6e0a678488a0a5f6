"""Histograms and prefix sums, written by hand and compared with CuPy.

A 256-bin histogram of 2^26 bytes from a dark image (most pixels near black), first with
one global atomicAdd per pixel, then privatized in shared memory per block; a 4096-bin
histogram of 2^25 uniform ints with global atomics; and an inclusive scan of 2^24 floats
as three kernels (Hillis-Steele per 1024-element block, scan of the block sums, add the
offsets) next to cp.cumsum.
"""

import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run
import cupy as cp

# (a) one global atomic per input byte.
HIST256_GLOBAL = r"""
extern "C" __global__ void hist256_global(const unsigned char* __restrict__ in,
                                          unsigned int* __restrict__ hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[in[i]], 1u);
}
"""

# (b) per-block private histogram in shared memory, grid-stride over 4-byte words,
# merged into the global histogram with one atomic per bin per block.
HIST256_SHARED = r"""
extern "C" __global__ void hist256_shared(const unsigned char* __restrict__ in,
                                          unsigned int* __restrict__ hist, int n)
{
    __shared__ unsigned int h[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();

    const unsigned int* words = reinterpret_cast<const unsigned int*>(in);
    int nw = n >> 2;
    int stride = gridDim.x * blockDim.x;
    int gid = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = gid; i < nw; i += stride) {
        unsigned int w = words[i];
        atomicAdd(&h[w & 0xffu], 1u);
        atomicAdd(&h[(w >> 8) & 0xffu], 1u);
        atomicAdd(&h[(w >> 16) & 0xffu], 1u);
        atomicAdd(&h[w >> 24], 1u);
    }
    for (int i = (nw << 2) + gid; i < n; i += stride)   // tail bytes
        atomicAdd(&h[in[i]], 1u);
    __syncthreads();

    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        atomicAdd(&hist[b], h[b]);
}
"""

# (c) 4096 bins, one global atomic per input value.
HIST4096_GLOBAL = r"""
extern "C" __global__ void hist4096_global(const int* __restrict__ in,
                                           unsigned int* __restrict__ hist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[in[i]], 1u);
}
"""

# (d) inclusive scan in three passes.
SCAN = r"""
#define SCAN_BLOCK 1024

// pass 1: Hillis-Steele inclusive scan of each 1024-element block,
// double-buffered in shared memory; the block total goes to block_sums.
extern "C" __global__ void scan_block_hs(const float* __restrict__ in, float* __restrict__ out,
                                         float* __restrict__ block_sums, int n)
{
    __shared__ float buf[2][SCAN_BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * SCAN_BLOCK + tid;
    int pin = 0;
    buf[0][tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (int off = 1; off < SCAN_BLOCK; off <<= 1) {
        float v = buf[pin][tid];
        if (tid >= off) v += buf[pin][tid - off];
        buf[1 - pin][tid] = v;
        pin = 1 - pin;
        __syncthreads();
    }
    if (i < n) out[i] = buf[pin][tid];
    if (tid == SCAN_BLOCK - 1) block_sums[blockIdx.x] = buf[pin][tid];
}

// pass 2: one block scans the block sums in place; each thread owns a contiguous chunk.
extern "C" __global__ void scan_block_sums(float* __restrict__ sums, int nb)
{
    __shared__ float buf[2][SCAN_BLOCK];
    int tid = threadIdx.x;
    int per = (nb + SCAN_BLOCK - 1) / SCAN_BLOCK;
    int begin = min(tid * per, nb);
    int end = min(begin + per, nb);

    float local = 0.0f;
    for (int j = begin; j < end; ++j) local += sums[j];

    int pin = 0;
    buf[0][tid] = local;
    __syncthreads();
    for (int off = 1; off < SCAN_BLOCK; off <<= 1) {
        float v = buf[pin][tid];
        if (tid >= off) v += buf[pin][tid - off];
        buf[1 - pin][tid] = v;
        pin = 1 - pin;
        __syncthreads();
    }

    float running = buf[pin][tid] - local;   // exclusive prefix of this chunk
    for (int j = begin; j < end; ++j) {
        running += sums[j];
        sums[j] = running;
    }
}

// pass 3: add the scanned total of all previous blocks.
extern "C" __global__ void add_block_offsets(float* __restrict__ out,
                                             const float* __restrict__ scanned_sums, int n)
{
    int i = blockIdx.x * SCAN_BLOCK + threadIdx.x;
    if (blockIdx.x > 0 && i < n) out[i] += scanned_sums[blockIdx.x - 1];
}
"""

args = parser(__doc__).parse_args()

cp.random.seed(0)

N8 = 1 << 26
pixels = cp.clip(cp.random.exponential(8.0, N8, dtype=cp.float32), 0, 255).astype(cp.uint8)
hist_a = cp.zeros(256, dtype=cp.uint32)
hist_b = cp.zeros(256, dtype=cp.uint32)

NI = 1 << 25
BINS = 4096
keys = cp.random.randint(0, BINS, size=NI, dtype=cp.int32)
hist_c = cp.zeros(BINS, dtype=cp.uint32)

NS = 1 << 24
SCAN_BLOCK = 1024
NBLK = (NS + SCAN_BLOCK - 1) // SCAN_BLOCK
xs = cp.random.random_sample(NS, dtype=cp.float32)
scan_out = cp.empty_like(xs)
block_sums = cp.empty(NBLK, dtype=cp.float32)
cumsum_out = cp.empty_like(xs)

hist256_global = cp.RawKernel(HIST256_GLOBAL, "hist256_global")
hist256_shared = cp.RawKernel(HIST256_SHARED, "hist256_shared")
hist4096_global = cp.RawKernel(HIST4096_GLOBAL, "hist4096_global")
scan_mod = cp.RawModule(code=SCAN)
scan_block_hs = scan_mod.get_function("scan_block_hs")
scan_block_sums = scan_mod.get_function("scan_block_sums")
add_block_offsets = scan_mod.get_function("add_block_offsets")


def step():
    hist_a.fill(0)
    hist256_global(((N8 + 255) // 256,), (256,), (pixels, hist_a, cp.int32(N8)))
    hist_b.fill(0)
    hist256_shared((132 * 4,), (256,), (pixels, hist_b, cp.int32(N8)))
    hist_c.fill(0)
    hist4096_global(((NI + 255) // 256,), (256,), (keys, hist_c, cp.int32(NI)))

    scan_block_hs((NBLK,), (SCAN_BLOCK,), (xs, scan_out, block_sums, cp.int32(NS)))
    scan_block_sums((1,), (SCAN_BLOCK,), (block_sums, cp.int32(NBLK)))
    add_block_offsets((NBLK,), (SCAN_BLOCK,), (scan_out, block_sums, cp.int32(NS)))
    cp.cumsum(xs, out=cumsum_out)


def check():
    ref256 = cp.bincount(pixels.astype(cp.int32), minlength=256)
    for name, h in (("hist256_global", hist_a), ("hist256_shared", hist_b)):
        if not bool(cp.array_equal(h.astype(cp.int64), ref256)):
            diff = int(cp.abs(h.astype(cp.int64) - ref256).sum())
            raise AssertionError(f"{name}: counts differ from cp.bincount (total |diff| {diff})")
    ref4096 = cp.bincount(keys, minlength=BINS)
    if not bool(cp.array_equal(hist_c.astype(cp.int64), ref4096)):
        raise AssertionError("hist4096_global: counts differ from cp.bincount")

    ref = cp.cumsum(xs.astype(cp.float64))
    for name, s in (("scan (3 kernels)", scan_out), ("cp.cumsum", cumsum_out)):
        if not bool(cp.allclose(s.astype(cp.float64), ref, rtol=1e-3, atol=1e-4)):
            err = float(cp.abs(s.astype(cp.float64) - ref).max())
            raise AssertionError(f"{name}: max abs error {err} (last {float(ref[-1])})")


run(step, name="cuda_histogram_scan", backend="cupy", args=args, check=check)
