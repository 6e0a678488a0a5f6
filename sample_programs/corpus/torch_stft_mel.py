"""Log-mel spectrogram features of a batch of audio in FP32, the way a speech front end
computes them in PyTorch without torchaudio.

128 clips of 10 s at 16 kHz: ``torch.stft`` (n_fft 1024, hop 256, Hann window, centred with
reflect padding), power spectrum as ``abs() ** 2``, an 80-band HTK mel filterbank applied as
a matmul, log with a floor, then per-utterance mean and variance normalisation over time.
The window is built inside the step, as it often is in feature-extraction code.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import DEV, parser, run  # noqa: E402

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
B, SR, SECONDS, N_FFT, HOP, N_MELS = 128, 16000, 10, 1024, 256, 80
L = SR * SECONDS


def hz_to_mel(f):
    return 2595.0 * math.log10(1.0 + f / 700.0)


def mel_filterbank(n_freqs, n_mels, sr):
    """(n_mels, n_freqs) triangular HTK filters from 0 Hz to Nyquist."""
    f = torch.linspace(0, sr / 2, n_freqs, dtype=torch.float64)
    m = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2, dtype=torch.float64)
    hz = 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    lower, center, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    up = (f[None, :] - lower) / (center - lower)
    down = (upper - f[None, :]) / (upper - center)
    return torch.clamp(torch.minimum(up, down), min=0.0).float()


fb = mel_filterbank(N_FFT // 2 + 1, N_MELS, SR).to(dev)
t = torch.arange(L, device=dev) / SR
tone = 100 + 3000 * torch.rand(B, 1, device=dev)
audio = 0.5 * torch.sin(2 * math.pi * tone * t) + 0.1 * torch.randn(B, L, device=dev)
out = {}


def step():
    window = torch.hann_window(N_FFT, device=dev)
    spec = torch.stft(audio, N_FFT, hop_length=HOP, window=window, center=True,
                      pad_mode="reflect", return_complex=True)      # (B, freq, frames)
    power = spec.abs() ** 2
    mel = torch.matmul(fb, power)                                   # (B, mels, frames)
    logmel = torch.log(mel.clamp(min=1e-10))
    mean = logmel.mean(dim=-1, keepdim=True)
    std = logmel.std(dim=-1, keepdim=True)
    out["logmel"] = logmel
    out["feat"] = (logmel - mean) / (std + 1e-5)


def check():
    x = audio[0].double().cpu().numpy()
    xp = np.pad(x, N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(xp, N_FFT)[::HOP]
    n = np.arange(N_FFT)
    w = 0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)                 # periodic Hann
    power = np.abs(np.fft.rfft(frames * w, axis=1)).T ** 2
    ref = np.log(np.maximum(fb.double().cpu().numpy() @ power, 1e-10))
    got = out["logmel"][0].double().cpu().numpy()
    if got.shape != ref.shape:
        raise AssertionError(f"shape {got.shape} vs {ref.shape}")
    err = np.abs(got - ref).max()
    if not err < 1e-2:
        raise AssertionError(f"log-mel differs from the NumPy reference by {err:.3g}")
    if not torch.isfinite(out["feat"]).all():
        raise AssertionError("non-finite normalised features")


run(step, name="torch_stft_mel", backend="torch", args=args, check=check)
