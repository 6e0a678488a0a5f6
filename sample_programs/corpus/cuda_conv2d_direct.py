"""Two 3 x 3 convolution layers as hand-written CUDA kernels in CuPy, with cuDNN as the control.

The first two layers of a ResNet-style stage on a batch of 32 images, float32, NCHW:
64 -> 128 channels, then 128 -> 128 channels, 3 x 3 kernels, stride 1, padding 1, 56 x 56
feature maps, weights in PyTorch's [K, C, 3, 3] layout with a bias per output channel, ReLU
after each layer. The CUDA version (``cupy.RawModule``, 256-thread blocks) computes each
output element in one thread: it loops over the input channels and the 3 x 3 window,
reading the input and the weights from global memory, zero padding by bounds checks; a
second kernel adds the bias and applies ReLU in place. The control runs the same two layers
on the same device buffers (shared through DLPack) with ``torch.nn.functional.conv2d``
(cuDNN, PyTorch's default settings) and ``torch.relu``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

N, C1, K, H, W, R, PAD = 32, 64, 128, 56, 56, 3, 1
THREADS = 256

CONV_SRC = r"""
extern "C" __global__
void conv2d_direct(const float* __restrict__ input, const float* __restrict__ weight,
                   float* __restrict__ output, int N, int C, int H, int W,
                   int K, int R, int S, int pad, int OH, int OW)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * K * OH * OW) return;
    int ow = idx % OW;
    int oh = (idx / OW) % OH;
    int k = (idx / (OW * OH)) % K;
    int n = idx / (OW * OH * K);

    float acc = 0.0f;
    for (int c = 0; c < C; c++) {
        for (int r = 0; r < R; r++) {
            for (int s = 0; s < S; s++) {
                int ih = oh - pad + r;
                int iw = ow - pad + s;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
                    acc += input[((n * C + c) * H + ih) * W + iw]
                         * weight[((k * C + c) * R + r) * S + s];
                }
            }
        }
    }
    output[idx] = acc;
}

extern "C" __global__
void bias_relu(float* __restrict__ data, const float* __restrict__ bias, int K, int HW,
               int total)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int k = (idx / HW) % K;
    float v = data[idx] + bias[k];
    data[idx] = v > 0.0f ? v : 0.0f;
}
"""


def host_conv_bias_relu(x, w, b):
    """One image: x [C, H, W], w [K, C, 3, 3], b [K] -> relu(conv(x, w) + b), float64."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    xp = np.pad(x, ((0, 0), (PAD, PAD), (PAD, PAD)))
    y = np.zeros((w.shape[0], H, W))
    for r in range(R):
        for s in range(R):
            y += np.tensordot(w[:, :, r, s], xp[:, r:r + H, s:s + W], axes=(1, 0))
    return np.maximum(y + b.astype(np.float64)[:, None, None], 0.0)


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp
    import torch
    import torch.nn.functional as F

    mod = cp.RawModule(code=CONV_SRC)
    conv = mod.get_function("conv2d_direct")
    bias_relu = mod.get_function("bias_relu")

    cp.random.seed(0)
    x = cp.abs(cp.random.standard_normal((N, C1, H, W), dtype=cp.float32))   # post-ReLU input
    w1 = cp.random.standard_normal((K, C1, R, R), dtype=cp.float32) * np.float32(
        np.sqrt(2.0 / (C1 * R * R)))
    b1 = cp.random.uniform(-0.1, 0.1, K, dtype=cp.float32)
    w2 = cp.random.standard_normal((K, K, R, R), dtype=cp.float32) * np.float32(
        np.sqrt(2.0 / (K * R * R)))
    b2 = cp.random.uniform(-0.1, 0.1, K, dtype=cp.float32)
    y1 = cp.empty((N, K, H, W), cp.float32)
    y2 = cp.empty((N, K, H, W), cp.float32)

    # the same device buffers seen by PyTorch (zero-copy)
    x_t, w1_t, b1_t, w2_t, b2_t = (torch.from_dlpack(a) for a in (x, w1, b1, w2, b2))
    out = {}

    total = N * K * H * W
    grid = ((total + THREADS - 1) // THREADS,)

    def layer(inp, w, b, y, c_in):
        conv(grid, (THREADS,), (inp, w, y, cp.int32(N), cp.int32(c_in), cp.int32(H),
                                cp.int32(W), cp.int32(K), cp.int32(R), cp.int32(R),
                                cp.int32(PAD), cp.int32(H), cp.int32(W)))
        bias_relu(grid, (THREADS,), (y, b, cp.int32(K), cp.int32(H * W), cp.int32(total)))

    def step():
        layer(x, w1, b1, y1, C1)
        layer(y1, w2, b2, y2, K)
        r1 = torch.relu(F.conv2d(x_t, w1_t, b1_t, padding=PAD))
        r2 = torch.relu(F.conv2d(r1, w2_t, b2_t, padding=PAD))
        out["ref1"], out["ref2"] = r1, r2

    def check():
        x0, w1h, b1h, w2h, b2h = (a.get() for a in (x[0], w1, b1, w2, b2))
        y1_0, y2_0 = y1[0].get(), y2[0].get()
        ref1 = host_conv_bias_relu(x0, w1h, b1h)
        ref2 = host_conv_bias_relu(y1_0, w2h, b2h)          # from the kernel's own layer 1
        for name, got, ref in (("layer 1", y1_0, ref1), ("layer 2", y2_0, ref2)):
            err = np.abs(got - ref).max() / np.abs(ref).max()
            if not err < 1e-5:
                raise AssertionError(f"direct conv {name}: relative error {err:.3g}")
        # cuDNN (TF32 allowed by PyTorch's defaults for convolutions) against the kernels
        for name, got, ref in (("layer 1", y1, out["ref1"]), ("layer 2", y2, out["ref2"])):
            ref = cp.from_dlpack(ref.detach())
            err = float(cp.abs(got - ref).max() / cp.abs(ref).max())
            if not err < 1e-2:
                raise AssertionError(f"{name}: kernels and cuDNN differ by {err:.3g}")

    run(step, name="cuda_conv2d_direct", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
