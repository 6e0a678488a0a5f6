"""A small image-processing pipeline in CuPy raw kernels on a 4096 x 4096 photo.

An interleaved 8-bit RGB image is converted to a float luminance plane (BT.601 weights), then
denoised with a 3 x 3 median filter, and blurred with a 7 x 7 Gaussian three ways: directly
from global memory with the weights in a global array, from a shared-memory tile with the
weights in constant memory, and as a separable pair of 1-D passes (a row pass, then a column
pass). Borders are clamped.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

H = W = 4096
R = 3                     # blur radius: 7 x 7 taps
SIGMA = 1.5
TILE = 16


def gaussian_1d():
    t = np.arange(-R, R + 1, dtype=np.float64)
    g = np.exp(-t * t / (2 * SIGMA * SIGMA))
    return (g / g.sum()).astype(np.float32)


G1 = gaussian_1d()
G2 = np.outer(G1, G1).astype(np.float32)

IMAGE_SRC = r"""
#define R %(R)d
#define KSIZE (2 * R + 1)
#define TILE %(TILE)d

__constant__ float c_weights[KSIZE * KSIZE] = { %(weights2)s };
__constant__ float c_weights1d[KSIZE] = { %(weights1)s };

__device__ __forceinline__ int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

extern "C" __global__ void rgb_to_gray(const unsigned char* __restrict__ rgb,
                                       float* __restrict__ gray, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    int idx = y * width + x;
    float r = rgb[3 * idx + 0];
    float g = rgb[3 * idx + 1];
    float b = rgb[3 * idx + 2];
    gray[idx] = (0.299f * r + 0.587f * g + 0.114f * b) * (1.0f / 255.0f);
}

extern "C" __global__ void median3x3(const float* __restrict__ in, float* __restrict__ out,
                                     int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float v[9];
    int n = 0;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)
            v[n++] = in[clampi(y + dy, 0, height - 1) * width + clampi(x + dx, 0, width - 1)];
    // insertion sort
    for (int i = 1; i < 9; i++) {
        float key = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > key) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = key;
    }
    out[y * width + x] = v[4];
}

extern "C" __global__ void gaussian_blur_global(const float* __restrict__ in,
                                                const float* __restrict__ weights,
                                                float* __restrict__ out, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float acc = 0.0f;
    for (int ky = -R; ky <= R; ky++) {
        for (int kx = -R; kx <= R; kx++) {
            int sx = clampi(x + kx, 0, width - 1);
            int sy = clampi(y + ky, 0, height - 1);
            acc += in[sy * width + sx] * weights[(ky + R) * KSIZE + (kx + R)];
        }
    }
    out[y * width + x] = acc;
}

// TILE x TILE threads; each block stages a (TILE + 2R)^2 window in shared memory.
extern "C" __global__ void gaussian_blur_shared(const float* __restrict__ in,
                                                float* __restrict__ out, int width, int height)
{
    __shared__ float tile[TILE + 2 * R][TILE + 2 * R];
    int x0 = blockIdx.x * TILE - R;
    int y0 = blockIdx.y * TILE - R;
    for (int ty = threadIdx.y; ty < TILE + 2 * R; ty += TILE) {
        for (int tx = threadIdx.x; tx < TILE + 2 * R; tx += TILE) {
            int sx = clampi(x0 + tx, 0, width - 1);
            int sy = clampi(y0 + ty, 0, height - 1);
            tile[ty][tx] = in[sy * width + sx];
        }
    }
    __syncthreads();
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x >= width || y >= height) return;
    float acc = 0.0f;
#pragma unroll
    for (int ky = 0; ky < KSIZE; ky++)
#pragma unroll
        for (int kx = 0; kx < KSIZE; kx++)
            acc += tile[threadIdx.y + ky][threadIdx.x + kx] * c_weights[ky * KSIZE + kx];
    out[y * width + x] = acc;
}

extern "C" __global__ void blur_rows(const float* __restrict__ in, float* __restrict__ out,
                                     int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float acc = 0.0f;
#pragma unroll
    for (int k = -R; k <= R; k++)
        acc += in[y * width + clampi(x + k, 0, width - 1)] * c_weights1d[k + R];
    out[y * width + x] = acc;
}

extern "C" __global__ void blur_cols(const float* __restrict__ in, float* __restrict__ out,
                                     int width, int height)
{
    int y = blockIdx.x * blockDim.x + threadIdx.x;
    int x = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float acc = 0.0f;
#pragma unroll
    for (int k = -R; k <= R; k++)
        acc += in[clampi(y + k, 0, height - 1) * width + x] * c_weights1d[k + R];
    out[y * width + x] = acc;
}
""" % {"R": R, "TILE": TILE,
       "weights2": ", ".join(f"{w:.9e}f" for w in G2.ravel()),
       "weights1": ", ".join(f"{w:.9e}f" for w in G1)}


def host_blur(img, y0, y1):
    """The 7 x 7 Gaussian of rows y0..y1 of img, clamped borders, float64."""
    pad = np.pad(img.astype(np.float64), R, mode="edge")
    out = np.zeros((y1 - y0, img.shape[1]))
    for ky in range(2 * R + 1):
        for kx in range(2 * R + 1):
            out += G2[ky, kx] * pad[y0 + ky:y1 + ky, kx:kx + img.shape[1]]
    return out


def host_median(img, y0, y1):
    pad = np.pad(img, 1, mode="edge")
    stack = [pad[y0 + dy:y1 + dy, dx:dx + img.shape[1]] for dy in range(3) for dx in range(3)]
    return np.median(np.stack(stack), axis=0)


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp

    rng = np.random.default_rng(3)
    mod = cp.RawModule(code=IMAGE_SRC)
    rgb_to_gray = mod.get_function("rgb_to_gray")
    median = mod.get_function("median3x3")
    blur_global = mod.get_function("gaussian_blur_global")
    blur_shared = mod.get_function("gaussian_blur_shared")
    blur_rows = mod.get_function("blur_rows")
    blur_cols = mod.get_function("blur_cols")

    # A smooth picture with salt-and-pepper noise, interleaved RGB bytes (H, W, 3)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32) / H
    base = np.stack([np.sin(6 * xx) * np.cos(4 * yy), xx * yy, np.cos(3 * (xx - yy))], -1)
    host_rgb = ((base - base.min()) / (base.max() - base.min()) * 255).astype(np.uint8)
    del yy, xx, base
    noise = rng.random((H, W)) < 0.02
    host_rgb[noise] = rng.integers(0, 256, (int(noise.sum()), 3), dtype=np.uint8)
    rgb = cp.asarray(host_rgb)
    weights = cp.asarray(G2.ravel())
    gray = cp.empty((H, W), cp.float32)
    clean = cp.empty((H, W), cp.float32)
    blurred_global = cp.empty((H, W), cp.float32)
    blurred_shared = cp.empty((H, W), cp.float32)
    tmp = cp.empty((H, W), cp.float32)
    blurred_sep = cp.empty((H, W), cp.float32)

    wh = (cp.int32(W), cp.int32(H))
    grid2d = ((W + TILE - 1) // TILE, (H + TILE - 1) // TILE)
    block2d = (TILE, TILE)
    grid_rows = ((W + 255) // 256, H)
    grid_cols = ((H + 255) // 256, W)

    def step():
        rgb_to_gray(grid2d, block2d, (rgb, gray) + wh)
        median(grid2d, block2d, (gray, clean) + wh)
        blur_global(grid2d, block2d, (clean, weights, blurred_global) + wh)
        blur_shared(grid2d, block2d, (clean, blurred_shared) + wh)
        blur_rows(grid_rows, (256, 1), (clean, tmp) + wh)
        blur_cols(grid_cols, (256, 1), (tmp, blurred_sep) + wh)

    def check():
        ref_gray = (host_rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])) / 255
        err = np.abs(gray.get() - ref_gray).max()
        if not err < 1e-5:
            raise AssertionError(f"rgb_to_gray: max error {err:.3g}")
        g = gray.get()
        for y0, y1 in ((0, 64), (H - 64, H)):
            if not np.allclose(clean[y0:y1].get(), host_median(g, y0, y1), atol=1e-6):
                raise AssertionError(f"median3x3 rows {y0}:{y1} differ")
        c = clean.get()
        for y0, y1 in ((0, 64), (2000, 2064), (H - 64, H)):
            ref = host_blur(c, y0, y1)
            for name, got in (("gaussian_blur_global", blurred_global),
                              ("gaussian_blur_shared", blurred_shared),
                              ("blur_rows + blur_cols", blurred_sep)):
                err = np.abs(got[y0:y1].get() - ref).max()
                if not err < 1e-5:
                    raise AssertionError(f"{name} rows {y0}:{y1}: max error {err:.3g}")

    run(step, name="cuda_image", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
