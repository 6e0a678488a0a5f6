"""Spectral feature extraction written with CuPy array expressions, as in an analysis notebook.

A batch of 2048 recorded signals of 4096 samples (float32, a few tones in noise) gets fresh
measurement noise from cupy.random, a Hann window, a batched real FFT, and the power
spectrum; from it the per-frequency mean of the dB spectrum over the batch (axis 0), the mean
power of each signal (axis 1), each signal's L2 norm through a cupy.ReductionKernel, the dB
conversion through a cupy.ElementwiseKernel, and the 64 loudest signals (argsort) with the
frequency bin of their spectral peak.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import cupy as cp  # noqa: E402
from common import parser, run  # noqa: E402

args = parser(__doc__).parse_args()

B, L = 2048, 4096
FS = 48000.0
TOP = 64

cp.random.seed(42)
t = cp.arange(L, dtype=cp.float32) / FS
freqs = cp.random.uniform(200, 8000, size=(B, 3)).astype(cp.float32)
amps = cp.random.uniform(0.1, 1.0, size=(B, 3)).astype(cp.float32)
signals = (amps[:, :, None] * cp.sin(2 * np.pi * freqs[:, :, None] * t)).sum(axis=1)
signals += 0.1 * cp.random.standard_normal((B, L), dtype=cp.float32)
window = cp.hanning(L)

power_to_db = cp.ElementwiseKernel(
    "T p", "T db",
    "db = 10 * log10(p + 1e-12)",
    "power_to_db")

l2norm = cp.ReductionKernel(
    "T x", "T y",
    "x * x",
    "a + b",
    "y = sqrt(a)",
    "0",
    "l2norm")

cp.cuda.Device().synchronize()
out = {}


def step():
    noise = cp.random.standard_normal(signals.shape, dtype=cp.float32)
    noisy = signals + 0.05 * noise
    windowed = noisy * window
    spec = cp.abs(cp.fft.rfft(windowed, axis=1)) ** 2
    db = power_to_db(spec)
    out["band_db"] = db.mean(axis=0)
    out["frame_power"] = spec.mean(axis=1)
    out["norms"] = l2norm(noisy, axis=1)
    loudest = cp.argsort(out["frame_power"])[::-1][:TOP]
    out["loudest"] = loudest
    out["peak_bin"] = spec[loudest].argmax(axis=1)
    out["noisy"] = noisy
    out["spec"] = spec


def close(got, ref, tol, what):
    err = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)
    if not err < tol:
        raise AssertionError(f"{what}: relative error {err:.3g} exceeds {tol:g}")


def check():
    noisy = out["noisy"].get()
    win = np.hanning(L)
    spec = np.abs(np.fft.rfft(noisy.astype(np.float64) * win, axis=1)) ** 2
    close(out["spec"].get()[:32], spec[:32], 1e-6, "power spectrum")
    close(out["band_db"].get(), (10 * np.log10(spec + 1e-12)).mean(axis=0), 1e-6, "band dB")
    close(out["frame_power"].get(), spec.mean(axis=1), 1e-6, "frame power")
    close(out["norms"].get(), np.sqrt((noisy.astype(np.float64) ** 2).sum(axis=1)), 1e-5,
          "l2 norms")
    fp = out["frame_power"].get()
    if not np.array_equal(out["loudest"].get(), np.argsort(fp, kind="stable")[::-1][:TOP]):
        raise AssertionError("argsort: loudest signals differ")
    sp = out["spec"].get()
    if not np.array_equal(out["peak_bin"].get(), sp[out["loudest"].get()].argmax(axis=1)):
        raise AssertionError("argmax: peak bins differ")
    if out["spec"].dtype != cp.float64:
        raise AssertionError(f"spectrum dtype {out['spec'].dtype}")


run(step, name="cupy_pipeline", backend="cupy", args=args, check=check)
