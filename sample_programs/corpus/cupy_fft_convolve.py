"""Blurring a batch of large images with a 31 x 31 kernel by FFT convolution, in CuPy.

Sixteen float32 grey images of 2048 x 2048 (gratings plus noise, values around 0..1) are
convolved with one non-negative, non-symmetric 31 x 31 kernel (a soft-edged disc of radius
14 whose weight ramps up from left to right, as for a defocus blur with vignetting), with
zero boundary and the output the same size as the input ("same" mode), then divided by the
kernel's sum.

``fft_convolve_same`` does it the textbook way: the images are zero padded to the size of
the full linear convolution (2048 + 31 - 1 = 2078 in each direction) and the kernel to the
same size, both go through ``cupy.fft.rfft2`` (the images as one batched transform), the
spectra are multiplied, ``cupy.fft.irfft2`` brings the product back, the centre 2048 x 2048
of every image is cropped, and the result is divided by ``kernel.sum()``. A direct
convolution of the first image with ``cupyx.scipy.ndimage.convolve`` (constant mode) runs as
the control.

``--cached-spectrum`` uses an ``FFTConvolver`` object made once before the loop: it picks the
padded size with ``cupyx.scipy.fft.next_fast_len`` (2100), keeps the kernel's spectrum
(already divided by the kernel's sum), and per call pads the images, transforms them,
multiplies by the stored spectrum, transforms back and crops.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

N_IMG, H, W = 16, 2048, 2048
KSIZE = 31


def make_kernel():
    """31 x 31 float32: a disc of radius 14 with a soft edge, weights ramping along x."""
    r = KSIZE // 2
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1].astype(np.float64)
    rho = np.sqrt(xx * xx + yy * yy)
    disc = np.clip(14.5 - rho, 0.0, 1.0)
    return (disc * (1.0 + 0.5 * xx / r)).astype(np.float32)


def host_direct(img, ker, y0, y1):
    """Rows y0..y1 of the zero-boundary 'same' convolution of img with ker, float64."""
    r = ker.shape[0] // 2
    pad = np.zeros((y1 - y0 + 2 * r, img.shape[1] + 2 * r))
    lo, hi = max(y0 - r, 0), min(y1 + r, img.shape[0])
    pad[lo - (y0 - r):hi - (y0 - r), r:r + img.shape[1]] = img[lo:hi]
    win = np.lib.stride_tricks.sliding_window_view(pad, ker.shape)   # [rows, W, 31, 31]
    return np.einsum("ywij,ij->yw", win, ker[::-1, ::-1].astype(np.float64))


def main():
    p = parser(__doc__)
    p.add_argument("--cached-spectrum", action="store_true",
                   help="kernel spectrum computed once, padded size from next_fast_len")
    args = p.parse_args()

    import cupy as cp
    from cupyx.scipy import ndimage
    from cupyx.scipy.fft import next_fast_len

    def fft_convolve_same(images, kernel):
        n, h, w = images.shape
        kh, kw = kernel.shape
        fh, fw = h + kh - 1, w + kw - 1
        padded = cp.zeros((n, fh, fw), dtype=cp.float32)
        padded[:, :h, :w] = images
        kpad = cp.zeros((fh, fw), dtype=cp.float32)
        kpad[:kh, :kw] = kernel
        spec = cp.fft.rfft2(padded) * cp.fft.rfft2(kpad)
        full = cp.fft.irfft2(spec, s=(fh, fw))
        top, left = kh // 2, kw // 2
        return full[:, top:top + h, left:left + w] / kernel.sum()

    class FFTConvolver:
        def __init__(self, shape, kernel):
            self.h, self.w = shape
            self.kh, self.kw = kernel.shape
            self.fh = next_fast_len(self.h + self.kh - 1)
            self.fw = next_fast_len(self.w + self.kw - 1, real=True)
            kpad = cp.zeros((self.fh, self.fw), dtype=cp.float32)
            kpad[:self.kh, :self.kw] = kernel
            self.kspec = cp.fft.rfft2(kpad) / kernel.sum()

        def __call__(self, images):
            n = images.shape[0]
            padded = cp.zeros((n, self.fh, self.fw), dtype=cp.float32)
            padded[:, :self.h, :self.w] = images
            full = cp.fft.irfft2(cp.fft.rfft2(padded) * self.kspec, s=(self.fh, self.fw))
            top, left = self.kh // 2, self.kw // 2
            return cp.ascontiguousarray(full[:, top:top + self.h, left:left + self.w])

    rng = np.random.default_rng(11)
    cp.random.seed(11)
    yy = cp.arange(H, dtype=cp.float32)[:, None]
    xx = cp.arange(W, dtype=cp.float32)[None, :]
    images = cp.empty((N_IMG, H, W), dtype=cp.float32)
    for i in range(N_IMG):
        fy, fx, phase = (float(v) for v in rng.uniform((0.005, 0.005, 0), (0.2, 0.2, 6.3)))
        images[i] = (0.5 + 0.3 * cp.sin(fy * yy + fx * xx + phase)
                     + 0.1 * cp.random.standard_normal((H, W), dtype=cp.float32))
    kernel_h = make_kernel()
    kernel = cp.asarray(kernel_h)
    convolver = FFTConvolver((H, W), kernel) if args.cached_spectrum else None
    out = {}

    def step():
        if args.cached_spectrum:
            blurred = convolver(images)
        else:
            blurred = fft_convolve_same(images, kernel)
        direct = ndimage.convolve(images[0], kernel, mode="constant", cval=0.0)
        out["blurred"], out["direct"] = blurred, direct

    def check():
        blurred, direct = out["blurred"], out["direct"]
        if blurred.shape != (N_IMG, H, W) or blurred.dtype != cp.float32:
            raise AssertionError(f"output {blurred.dtype} {blurred.shape}")
        ref = direct / float(kernel_h.astype(np.float64).sum())
        err = float(cp.abs(blurred[0] - ref).max() / cp.abs(ref).max())
        if not err < 1e-3:
            raise AssertionError(f"FFT and direct convolution differ by {err:.3g} (relative)")
        ksum = kernel_h.astype(np.float64).sum()
        for i in (0, N_IMG - 1):
            img = images[i].get().astype(np.float64)
            for y0, y1 in ((0, 8), (1020, 1028), (H - 8, H)):
                want = host_direct(img, kernel_h, y0, y1) / ksum
                got = blurred[i, y0:y1].get()
                err = np.abs(got - want).max() / np.abs(want).max()
                if not err < 1e-3:
                    raise AssertionError(f"image {i} rows {y0}:{y1}: relative error {err:.3g}")

    run(step, name="cupy_fft_convolve", backend="cupy", args=args,
        variant="cached_spectrum" if args.cached_spectrum else "baseline", check=check)


if __name__ == "__main__":
    main()
