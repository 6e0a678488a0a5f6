"""A polyphase filter bank (PFB) spectrometer for two polarisations, written with CuPy arrays.

The channeliser of a radio telescope back end, as an analysis script prototypes it: one
block of complex baseband voltages per polarisation (complex64, 8199 x 4096 samples, 269 MB
each; Gaussian noise plus a narrow tone in each polarisation and a weaker drifting tone in
one) goes through a critically sampled 4096-channel PFB with 8 taps: the prototype low-pass
filter (a windowed sinc of 8 x 4096 coefficients, Hann window, float32) is split into its 8
phases ``h[t, c]``, and frame f of the filter bank output is
``sum_t h[t, :] * x[f + t, :]`` over the reshaped [frames + 7, 4096] voltages, then a
4096-point complex FFT per frame (cuFFT, batch 8192). The script then detects power
(``abs() ** 2``), forms Stokes I (the sum of the two polarisations), integrates 16 frames
(a mean over [512, 16, 4096]) and converts to dB.

As written, the FIR is a Python loop over the 8 taps: ``acc = h[0] * x[0:F]`` then
``acc += h[t] * x[t:t + F]``, a 268 MB complex64 temporary and an in-place add per tap.

``--fused-fir`` computes the 8-tap FIR as one ``cupy.ElementwiseKernel`` per polarisation
that reads the 8 input samples of each output and writes it once; the FFT, detection and
integration are unchanged.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

CHANNELS, TAPS, FRAMES, INTEG = 4096, 8, 8192, 16
ROWS = FRAMES + TAPS - 1
TONES = ((1000.25, 0.5), (2900.6, 0.35))          # (channel position, amplitude) per pol
DRIFT = (3500.0, 0.08)                            # a weaker tone drifting by 2 channels in pol Y


def prototype_filter():
    """Windowed-sinc prototype low-pass of TAPS * CHANNELS coefficients, [TAPS, CHANNELS]."""
    n = np.arange(TAPS * CHANNELS, dtype=np.float64)
    x = (n - (TAPS * CHANNELS - 1) / 2.0) / CHANNELS
    h = np.sinc(x) * np.hanning(TAPS * CHANNELS)
    h /= h.sum() / CHANNELS
    return h.reshape(TAPS, CHANNELS).astype(np.float32)


def host_spectrum(x_pols, h, row):
    """Stokes I integration ``row`` in float64 NumPy (dB), from the host copies of the input."""
    total = 0.0
    f0 = row * INTEG
    for x in x_pols:
        xs = x.reshape(ROWS, CHANNELS)[f0:f0 + INTEG + TAPS - 1].astype(np.complex128)
        acc = np.zeros((INTEG, CHANNELS), np.complex128)
        for t in range(TAPS):
            acc += h[t].astype(np.float64) * xs[t:t + INTEG]
        total = total + np.abs(np.fft.fft(acc, axis=1)) ** 2
    return 10.0 * np.log10(total.mean(axis=0))


def main():
    p = parser(__doc__)
    p.add_argument("--fused-fir", action="store_true",
                   help="the 8-tap polyphase FIR as one ElementwiseKernel per polarisation")
    args = p.parse_args()

    import cupy as cp

    h_host = prototype_filter()
    h = cp.asarray(h_host)
    rng = cp.random.default_rng(0)
    n = cp.arange(ROWS * CHANNELS, dtype=cp.float64)
    pols = []
    for k, (chan, amp) in enumerate(TONES):
        noise = rng.standard_normal((2, ROWS * CHANNELS), dtype=cp.float32)
        phase = (chan / CHANNELS * n) % 1.0
        sig = amp * cp.exp(2j * math.pi * phase)
        if k == 1:                                # slow drift: 2 channels over the block
            chan_d = DRIFT[0] + 2.0 * n / n.size
            sig = sig + DRIFT[1] * cp.exp(2j * math.pi * ((chan_d / CHANNELS * n) % 1.0))
        x = (noise[0] + 1j * noise[1]) * np.float32(math.sqrt(0.5)) + sig
        pols.append(x.astype(cp.complex64))
        del noise, phase, sig, x
    del n
    frames = [x.reshape(ROWS, CHANNELS) for x in pols]

    pfb_fir = cp.ElementwiseKernel(
        "raw T x, raw float32 h, int32 n_chan, int32 n_taps", "T y",
        """
        const int c = i % n_chan;
        const int f = i / n_chan;
        T acc = T(0, 0);
        for (int t = 0; t < n_taps; ++t) {
            acc += h[t * n_chan + c] * x[(f + t) * n_chan + c];
        }
        y = acc;
        """,
        "pfb_fir")

    out = {}

    def channelise(xs):
        if args.fused_fir:
            acc = cp.empty((FRAMES, CHANNELS), cp.complex64)
            pfb_fir(xs, h, np.int32(CHANNELS), np.int32(TAPS), acc)
        else:
            acc = h[0] * xs[0:FRAMES]
            for t in range(1, TAPS):
                acc += h[t] * xs[t:t + FRAMES]
        spec = cp.fft.fft(acc, axis=-1)
        return cp.abs(spec) ** 2

    def step():
        stokes_i = channelise(frames[0])
        stokes_i += channelise(frames[1])
        integ = stokes_i.reshape(FRAMES // INTEG, INTEG, CHANNELS).mean(axis=1)
        out["db"] = 10.0 * cp.log10(integ)

    def check():
        db = out["db"]
        if db.shape != (FRAMES // INTEG, CHANNELS) or db.dtype != cp.float32:
            raise AssertionError(f"spectrum {db.shape} {db.dtype}")
        x_host = [cp.asnumpy(x) for x in pols]
        for row in (0, 311):
            want = host_spectrum(x_host, h_host, row)
            got = cp.asnumpy(db[row]).astype(np.float64)
            err = np.abs(got - want).max()
            if not err < 1e-3:
                raise AssertionError(f"integration {row}: max error {err:.3g} dB")
        mean_db = cp.asnumpy(db.mean(axis=0))
        floor = np.median(mean_db)
        for chan, _ in TONES:
            c = int(round(chan))
            if not mean_db[c] > floor + 15.0:
                raise AssertionError(f"tone in channel {c}: {mean_db[c]:.1f} dB, floor "
                                     f"{floor:.1f} dB")

    run(step, name="cupy_pfb_channelizer", backend="cupy", args=args,
        variant="fused_fir" if args.fused_fir else "baseline", check=check)


if __name__ == "__main__":
    main()
