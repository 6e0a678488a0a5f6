"""Weight-only int8 linear layers (W8A16) with a user Triton GEMM, next to cuBLAS in fp16.

Four 4096 -> 4096 linear layers applied in sequence to 4096 fp16 activation rows, each
followed by bias and SiLU, as in a chain of projections of a weight-only quantised model.
Each layer's weight is stored as int8 in PyTorch's [out, in] layout with one fp16 scale per
output channel (symmetric absmax quantisation of a Gaussian weight, done once at load).

The Triton kernel (the tutorial's grouped tile order, block sizes chosen by hand, no
autotuning: 128 x 128 output tiles, K steps of 32, GROUP_M 8, 4 warps, 3 stages) loads an
fp16 tile of the activations and an int8 tile of the weight read as W^T, converts the
weight tile to fp16 and multiplies it by the channel scales, accumulates with ``tl.dot`` in
float32 and writes fp16; bias and SiLU are applied afterwards with ``F.silu(y + bias)``.
The control is the same chain with ``torch.matmul`` on fp16 weights dequantised once at
load (``w_int8.half() * scale[:, None]``), then the same bias and SiLU.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

M, D, LAYERS = 4096, 4096, 4
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 128, 32, 8
NUM_WARPS, NUM_STAGES = 4, 3


@triton.jit
def w8a16_matmul_kernel(a_ptr, w_ptr, scale_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    # W is [N, K]; the tile is read as [BLOCK_K, BLOCK_N] of W^T
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
    scale = tl.load(scale_ptr + offs_n)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0)
        b = w.to(tl.float16) * scale[None, :]
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


def w8a16_linear(a, w_q, scale):
    """a [M, K] fp16 @ (w_q [N, K] int8 * scale [N] fp16)^T -> [M, N] fp16, no bias."""
    m, k = a.shape
    n = w_q.shape[0]
    c = torch.empty((m, n), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    w8a16_matmul_kernel[grid](a, w_q, scale, c, m, n, k,
                              a.stride(0), a.stride(1), w_q.stride(0), w_q.stride(1),
                              c.stride(0), c.stride(1),
                              BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                              GROUP_M=GROUP_M, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c


def quantize_per_channel(w):
    """Symmetric int8 per output channel: (int8 [N, K], fp16 scale [N])."""
    scale = (w.abs().amax(dim=1) / 127.0).half()
    w_q = torch.clamp(torch.round(w / scale.float()[:, None]), -127, 127).to(torch.int8)
    return w_q, scale


def main():
    args = parser(__doc__).parse_args()
    dev = "cuda"
    torch.manual_seed(0)

    layers, ref_layers = [], []
    for _ in range(LAYERS):
        w = torch.randn(D, D, device=dev) * (2.0 / D) ** 0.5
        w_q, scale = quantize_per_channel(w)
        bias = (0.05 * torch.randn(D, device=dev)).half()
        layers.append((w_q, scale, bias))
        ref_layers.append((w_q.half() * scale[:, None], bias))      # dequantised once
    del w
    x = torch.randn(M, D, device=dev, dtype=torch.float16)
    out = {}

    def step():
        h = x
        for i, (w_q, scale, bias) in enumerate(layers):
            h = F.silu(w8a16_linear(h, w_q, scale) + bias)
            if i == 0:
                out["h1"] = h
        r = x
        for w_deq, bias in ref_layers:
            r = F.silu(torch.matmul(r, w_deq.t()) + bias)
        out["y"], out["ref"] = h, r

    def check():
        w_deq, bias = ref_layers[0]
        rows = slice(0, 64)
        want = F.silu(x[rows].double() @ w_deq.double().t() + bias.double())
        got = out["h1"][rows].double()
        err = float((got - want).abs().max() / want.abs().max())
        if not err < 1e-2:
            raise AssertionError(f"layer 1 (Triton) against float64: relative error {err:.3g}")
        y, ref = out["y"].float(), out["ref"].float()
        if not torch.isfinite(y).all():
            raise AssertionError("non-finite output from the Triton chain")
        err = float((y - ref).abs().max() / ref.abs().max())
        if not err < 2e-2:
            raise AssertionError(f"Triton chain and cuBLAS chain differ by {err:.3g}")

    run(step, name="triton_int8_matmul", backend="torch", args=args, check=check)


if __name__ == "__main__":
    main()
