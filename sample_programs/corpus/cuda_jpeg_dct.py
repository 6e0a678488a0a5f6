"""The forward DCT and quantisation stage of a JPEG encoder for 8K video frames, in a CuPy
RawModule.

Eight frames of 7680 x 4320 in planar YCbCr 4:2:0 (uint8 luma 33 MB and two 3840 x 2160
chroma planes per frame; synthetic content: gradients, textures, edges and sensor noise)
are level-shifted by 128, transformed by the 8 x 8 two-dimensional DCT-II (the orthonormal
matrix form, JPEG's normalisation) and quantised with the standard JPEG luminance and
chrominance tables at quality 90, rounded to int16 coefficients stored block by block
(64 coefficients of a block contiguous, row-major). One launch per plane and frame
(24 per step).

A block of 64 threads takes a strip of eight 8 x 8 blocks (64 x 8 pixels). Each thread loads
one row of one block (8 bytes), does the row DCT in registers and writes its 8 results
into a shared-memory strip laid out like the image (``tile[row][block * 8 + u]``); after a
barrier each thread reads one column of its block, does the column DCT and writes it back;
after a second barrier each thread reads one row of coefficients, quantises it and stores
8 int16 with one 16-byte store. Rows are written and read with 8 consecutive floats per
thread, so the threads of a warp hit the shared-memory banks at a stride of 8 words.

``--padded-smem`` pads each block's 8-float row segment to 9 floats in shared memory
(a strip row of 72 floats instead of 64), so those row accesses fall on distinct banks.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

WIDTH, HEIGHT, N_FRAMES, QUALITY = 7680, 4320, 8, 90
STRIP = 8                                      # 8 x 8 blocks per thread block

JPEG_LUMA = np.array([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], np.float64)
JPEG_CHROMA = np.array([
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99,
    24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99], np.float64)

DCT_SRC = r"""
#define STRIP 8

__constant__ float dct_mat[64];                 // A[u][x] = c(u) cos((2x + 1) u pi / 16)

template <int SEG>                              // floats per block row segment in the strip
__device__ __forceinline__ void dct_quant_strip(const unsigned char* __restrict__ plane,
                                                short* __restrict__ coef,
                                                const float* __restrict__ recip_q,
                                                int width)
{
    __shared__ float tile[8][STRIP * SEG];
    const int tx = threadIdx.x & 7;             // which 8 x 8 block of the strip
    const int ty = threadIdx.x >> 3;            // row (first and last pass) or column
    const int bx = blockIdx.x * STRIP + tx;     // block column in the plane
    const int by = blockIdx.y;                  // block row in the plane
    const int col0 = tx * SEG;

    // one row of one block: 8 pixels, level shifted
    const uint2 raw = *reinterpret_cast<const uint2*>(plane + (size_t)(by * 8 + ty) * width
                                                      + bx * 8);
    float v[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        v[k] = (float)((raw.x >> (8 * k)) & 0xff) - 128.0f;
        v[k + 4] = (float)((raw.y >> (8 * k)) & 0xff) - 128.0f;
    }
    // row DCT in registers
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        float s = 0.0f;
#pragma unroll
        for (int x = 0; x < 8; ++x) s = fmaf(dct_mat[u * 8 + x], v[x], s);
        tile[ty][col0 + u] = s;
    }
    __syncthreads();

    // column DCT: column ty of block tx
#pragma unroll
    for (int y = 0; y < 8; ++y) v[y] = tile[y][col0 + ty];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        float s = 0.0f;
#pragma unroll
        for (int y = 0; y < 8; ++y) s = fmaf(dct_mat[u * 8 + y], v[y], s);
        tile[u][col0 + ty] = s;
    }
    __syncthreads();

    // row ty of the coefficients: quantise, one 16-byte store
    int packed[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        int q0 = __float2int_rn(tile[ty][col0 + 2 * k] * recip_q[ty * 8 + 2 * k]);
        int q1 = __float2int_rn(tile[ty][col0 + 2 * k + 1] * recip_q[ty * 8 + 2 * k + 1]);
        q0 = max(-32768, min(32767, q0));
        q1 = max(-32768, min(32767, q1));
        packed[k] = (int)(((unsigned)q0 & 0xffffu) | ((unsigned)q1 << 16));
    }
    const size_t blk = (size_t)by * (width / 8) + bx;
    *reinterpret_cast<int4*>(coef + blk * 64 + ty * 8) =
        make_int4(packed[0], packed[1], packed[2], packed[3]);
}

extern "C" __global__ void __launch_bounds__(64)
dct_quant(const unsigned char* plane, short* coef, const float* recip_q, int width)
{
    dct_quant_strip<8>(plane, coef, recip_q, width);
}

extern "C" __global__ void __launch_bounds__(64)
dct_quant_padded(const unsigned char* plane, short* coef, const float* recip_q, int width)
{
    dct_quant_strip<9>(plane, coef, recip_q, width);
}
"""


def quant_table(base, quality):
    scale = 5000.0 / quality if quality < 50 else 200.0 - 2.0 * quality
    return np.clip(np.floor((base * scale + 50.0) / 100.0), 1, 255)


def dct_matrix():
    u = np.arange(8)[:, None]
    x = np.arange(8)[None, :]
    a = np.cos((2 * x + 1) * u * np.pi / 16.0) * np.sqrt(2.0 / 8.0)
    a[0] /= np.sqrt(2.0)
    return a


def host_dct_quant(plane, q):
    """float64 reference: [by, bx, 64] int16 coefficients of a uint8 plane."""
    h, w = plane.shape
    blocks = plane.reshape(h // 8, 8, w // 8, 8).transpose(0, 2, 1, 3).astype(np.float64) - 128
    a = dct_matrix()
    f = a @ blocks @ a.T                                  # [by, bx, vertical, horizontal]
    return np.rint(f.reshape(h // 8, w // 8, 64) / q).astype(np.int16)


def make_frames(cp):
    """Synthetic 4:2:0 frames on the device: gradients, a moving texture, edges, noise."""
    rng = cp.random.default_rng(0)
    frames = []
    for f in range(N_FRAMES):
        planes = []
        for (w, h, bias) in ((WIDTH, HEIGHT, 0.0), (WIDTH // 2, HEIGHT // 2, 40.0),
                             (WIDTH // 2, HEIGHT // 2, -30.0)):
            yy, xx = cp.meshgrid(cp.arange(h, dtype=cp.float32), cp.arange(w, dtype=cp.float32),
                                 indexing="ij")
            img = (110.0 + bias + 60.0 * cp.sin(xx / w * 3.0 + f * 0.1) * cp.cos(yy / h * 2.0)
                   + 25.0 * cp.sin(xx * 0.21 + yy * 0.13 + f) * (xx > w * 0.4)
                   + 40.0 * ((xx - w / 2) ** 2 + (yy - h / 2) ** 2 < (h / 4) ** 2)
                   + 4.0 * rng.standard_normal((h, w), dtype=cp.float32))
            planes.append(cp.clip(cp.rint(img), 0, 255).astype(cp.uint8))
        frames.append(planes)
    return frames


def main():
    p = parser(__doc__)
    p.add_argument("--padded-smem", action="store_true",
                   help="pad each block row to 9 floats in shared memory")
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=DCT_SRC, options=("-std=c++17",))
    kern = mod.get_function("dct_quant_padded" if args.padded_smem else "dct_quant")
    cp.ndarray((64,), cp.float32, mod.get_global("dct_mat")).set(
        dct_matrix().astype(np.float32).ravel())
    q_luma = quant_table(JPEG_LUMA, QUALITY)
    q_chroma = quant_table(JPEG_CHROMA, QUALITY)
    rq = {"luma": cp.asarray((1.0 / q_luma).astype(np.float32)),
          "chroma": cp.asarray((1.0 / q_chroma).astype(np.float32))}

    frames = make_frames(cp)
    coefs = [[cp.empty((pl.shape[0] // 8, pl.shape[1] // 8, 64), cp.int16) for pl in fr]
             for fr in frames]

    def step():
        for fr, co in zip(frames, coefs):
            for k, (pl, c) in enumerate(zip(fr, co)):
                h, w = pl.shape
                kern((w // (8 * STRIP), h // 8), (64,),
                     (pl, c, rq["luma" if k == 0 else "chroma"], np.int32(w)))

    def check():
        for f, k in ((0, 0), (0, 1), (0, 2), (7, 0)):
            q = q_luma if k == 0 else q_chroma
            want = host_dct_quant(cp.asnumpy(frames[f][k]), q)
            got = cp.asnumpy(coefs[f][k])
            diff = np.abs(got.astype(np.int32) - want)
            # exact .5 ties are common (the DC term is a sum of integers / 8 / q); float32
            # with a reciprocal multiply may round a tie the other way than float64
            if diff.max() > 1 or (diff > 0).mean() > 5e-3:
                raise AssertionError(f"frame {f} plane {k}: {int((diff > 0).sum())} of "
                                     f"{diff.size} coefficients differ (max {diff.max()})")
        nz = float((coefs[0][0] != 0).mean())
        if not 0.01 < nz < 0.9:
            raise AssertionError(f"implausible share of non-zero coefficients {nz:.3f}")

    run(step, name="cuda_jpeg_dct", backend="cupy", args=args,
        variant="padded_smem" if args.padded_smem else "baseline", check=check)


if __name__ == "__main__":
    main()
