"""Denoising and tone mapping of a burst of raw camera frames, written with CuPy.

Eight monochrome 12-bit sensor frames of 4096 x 3072 pixels stored as uint16, with per-frame
black level (about 256) and gain metadata (the gain maps the white level 4095 to 1.0 and
carries the frame's exposure compensation); the frames have shot and read noise and a
sprinkling of hot pixels. One step:

- convert to float32, subtract the frame's black level and multiply by its gain (three
  CuPy expressions, the per-frame values broadcast from (8, 1, 1) arrays);
- a 3 x 3 median filter within each frame (``cupyx.scipy.ndimage.median_filter`` with
  size (1, 3, 3)), then a Gaussian blur with sigma 1.2 within each frame
  (``gaussian_filter`` with sigma (0, 1.2, 1.2), reflect borders);
- clip to [0, 1], a gamma curve (``cp.power`` with exponent 1 / 2.2), scale to 0..255 with
  rounding and convert to uint8;
- a 256-bin histogram of each output frame (``cp.histogram`` in a loop over the frames).

``--fused`` does the conversion/black-level/gain chain and the clip/gamma/scale/convert
chain each as one ``cupy.ElementwiseKernel``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

FRAMES, H, W = 8, 3072, 4096
WHITE = 4095.0
SIGMA, TRUNCATE = 1.2, 4.0
INV_GAMMA = 1.0 / 2.2


def host_pipeline(raw, black, gain, y0, y1):
    """Rows y0..y1 of one frame through the same pipeline in float64, reflect borders."""
    radius = int(TRUNCATE * SIGMA + 0.5)
    m = radius + 1
    rows = np.arange(y0 - m, y1 + m)
    rows = np.where(rows < 0, -rows - 1, rows)
    rows = np.where(rows >= raw.shape[0], 2 * raw.shape[0] - rows - 1, rows)
    lin = (raw[rows].astype(np.float64) - black) * gain
    lin = np.pad(lin, ((0, 0), (m, m)), mode="symmetric")
    # the median of the reflected input is the reflected median, so "valid" windows on the
    # padded band give the median with its own reflected border, as the blur needs it
    hh, ww = lin.shape
    med = np.median(np.stack([lin[dy:hh - 2 + dy, dx:ww - 2 + dx]
                              for dy in range(3) for dx in range(3)]), axis=0)
    t = np.arange(-radius, radius + 1)
    g = np.exp(-0.5 * t * t / (SIGMA * SIGMA))
    g /= g.sum()
    k = 2 * radius + 1
    mh, mw = med.shape
    blur = sum(g[i] * med[i:mh - k + 1 + i] for i in range(k))
    blur = sum(g[i] * blur[:, i:mw - k + 1 + i] for i in range(k))
    tone = np.power(np.clip(blur, 0.0, 1.0), INV_GAMMA)
    return np.floor(tone * 255.0 + 0.5)


def main():
    p = parser(__doc__)
    p.add_argument("--fused", action="store_true",
                   help="the two elementwise chains as ElementwiseKernels")
    args = p.parse_args()

    import cupy as cp
    from cupyx.scipy import ndimage

    rng = np.random.default_rng(7)
    black = (256.0 + rng.uniform(-4, 4, FRAMES)).astype(np.float32)
    exposure = rng.uniform(0.8, 1.25, FRAMES)
    gain = (exposure / (WHITE - 256.0)).astype(np.float32)

    # synthetic scene (smooth gradients and rings) with shot/read noise and hot pixels
    cp.random.seed(7)
    yy, xx = cp.meshgrid(cp.linspace(-1, 1, H, dtype=cp.float32),
                         cp.linspace(-1, 1, W, dtype=cp.float32), indexing="ij")
    scene = 0.45 + 0.3 * cp.cos(9.0 * cp.sqrt(xx * xx + yy * yy)) * cp.exp(-xx * xx) + 0.1 * xx
    del yy, xx
    frames = []
    for f in range(FRAMES):
        signal = scene * ((WHITE - 256.0) / float(exposure[f]))
        noisy = signal + cp.sqrt(cp.maximum(signal, 0)) * cp.random.standard_normal(
            (H, W), dtype=cp.float32) + 3.0 * cp.random.standard_normal((H, W),
                                                                        dtype=cp.float32)
        hot = cp.random.random((H, W), dtype=cp.float32) < 1e-4
        noisy = cp.where(hot, WHITE, noisy + float(black[f]))
        frames.append(cp.clip(cp.rint(noisy), 0, WHITE).astype(cp.uint16))
    raw = cp.stack(frames)
    del frames, scene
    black_d = cp.asarray(black).reshape(FRAMES, 1, 1)
    gain_d = cp.asarray(gain).reshape(FRAMES, 1, 1)

    raw_to_linear = cp.ElementwiseKernel(
        "uint16 raw, float32 black, float32 gain", "float32 lin",
        "lin = ((float)raw - black) * gain",
        "raw_to_linear")
    tone_to_u8 = cp.ElementwiseKernel(
        "float32 x, float32 inv_gamma", "uint8 y",
        "float v = fminf(fmaxf(x, 0.0f), 1.0f);"
        "y = (unsigned char)(powf(v, inv_gamma) * 255.0f + 0.5f)",
        "tone_to_u8")
    out = {}

    def step():
        if args.fused:
            lin = raw_to_linear(raw, black_d, gain_d)
        else:
            lin = raw.astype(cp.float32)
            lin = lin - black_d
            lin = lin * gain_d
        den = ndimage.median_filter(lin, size=(1, 3, 3))
        den = ndimage.gaussian_filter(den, sigma=(0, SIGMA, SIGMA), truncate=TRUNCATE)
        if args.fused:
            img8 = tone_to_u8(den, np.float32(INV_GAMMA))
        else:
            tone = cp.clip(den, 0.0, 1.0)
            tone = cp.power(tone, INV_GAMMA)
            tone = tone * 255.0 + 0.5
            img8 = tone.astype(cp.uint8)
        hists = []
        for f in range(FRAMES):
            h, _ = cp.histogram(img8[f], bins=256, range=(0, 256))
            hists.append(h)
        out["img8"], out["hists"] = img8, hists

    def check():
        img8 = out["img8"]
        if img8.dtype != cp.uint8 or img8.shape != (FRAMES, H, W):
            raise AssertionError(f"output {img8.dtype} {img8.shape}")
        raw0 = raw[3].get()
        for y0, y1 in ((0, 24), (1500, 1524), (H - 24, H)):
            ref = host_pipeline(raw0, float(black[3]), float(gain[3]), y0, y1)
            got = img8[3, y0:y1].get().astype(np.float64)
            diff = np.abs(got - ref)
            if diff.max() > 1 or (diff > 0).mean() > 0.01:
                raise AssertionError(f"frame 3 rows {y0}:{y1}: max diff {diff.max():.0f}, "
                                     f"{(diff > 0).mean():.2%} of pixels differ")
        for f in (0, FRAMES - 1):
            ref = np.bincount(img8[f].get().ravel(), minlength=256)
            if not np.array_equal(out["hists"][f].get(), ref):
                raise AssertionError(f"histogram of frame {f} differs from np.bincount")

    run(step, name="cupy_image_denoise", backend="cupy", args=args,
        variant="fused" if args.fused else "baseline", check=check)


if __name__ == "__main__":
    main()
