"""Attention forward in fp16 with user Triton kernels: a flash-attention-style kernel next to
the unfused formulation.

B=8, 16 heads, 2048 positions, head size 64. ``flash_fwd_kernel`` keeps a block of 128
queries in registers and streams keys and values in blocks of 64 with an online softmax
(non-causal, and causal where key blocks past the diagonal are skipped). The naive path
materialises the full score matrix: ``torch.matmul(q, k^T)`` in fp16, a Triton row-softmax
kernel (one program per row, scale folded in) writing the probabilities back in fp16, then
``torch.matmul(p, v)``.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def flash_fwd_kernel(Q, K, V, O, sm_scale,
                     stride_qz, stride_qh, stride_qm, stride_qk,
                     stride_kz, stride_kh, stride_kn, stride_kk,
                     stride_vz, stride_vh, stride_vn, stride_vk,
                     stride_oz, stride_oh, stride_om, stride_ok,
                     H, N_CTX,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh
    o_base = O + off_z * stride_oz + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk,
                mask=offs_m[:, None] < N_CTX, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504                 # work in base 2
    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)

    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kk,
                    mask=cols[None, :] < N_CTX, other=0.0)          # (HEAD_DIM, BLOCK_N)
        qk = tl.dot(q, k) * qk_scale
        valid = cols[None, :] < N_CTX
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=cols[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_new

    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
             acc.to(tl.float16), mask=offs_m[:, None] < N_CTX)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x * scale
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, (num / tl.sum(num, axis=0)).to(tl.float16),
             mask=mask)


B, H, S, HD = 8, 16, 2048, 64
BLOCK_M, BLOCK_N = 128, 64


def main():
    args = parser(__doc__).parse_args()
    dev = "cuda"
    gen = torch.Generator(device=dev)
    gen.manual_seed(7)
    q, k, v = (torch.randn(B, H, S, HD, device=dev, dtype=torch.float16, generator=gen)
               for _ in range(3))
    o_flash = torch.empty_like(q)
    o_causal = torch.empty_like(q)
    probs = torch.empty(B, H, S, S, device=dev, dtype=torch.float16)
    sm_scale = 1.0 / math.sqrt(HD)
    out = {}

    def flash(o, causal):
        grid = (triton.cdiv(S, BLOCK_M), B * H)
        flash_fwd_kernel[grid](q, k, v, o, sm_scale,
                               q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                               k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                               v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                               o.stride(0), o.stride(1), o.stride(2), o.stride(3),
                               H, S, HEAD_DIM=HD, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                               CAUSAL=causal, num_warps=4, num_stages=3)

    def naive():
        scores = torch.matmul(q, k.transpose(-2, -1))               # (B, H, S, S) fp16
        softmax_kernel[(B * H * S,)](scores, probs, S, sm_scale,
                                     BLOCK=triton.next_power_of_2(S), num_warps=8)
        return torch.matmul(probs, v)

    def step():
        flash(o_flash, False)
        flash(o_causal, True)
        out["naive"] = naive()

    def check():
        ref = F.scaled_dot_product_attention(q, k, v)
        for name, got in (("flash", o_flash), ("naive", out["naive"])):
            try:
                torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-2)
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        try:
            torch.testing.assert_close(o_causal, ref, rtol=2e-2, atol=2e-2)
        except AssertionError as e:
            raise AssertionError(f"flash causal: {e}") from None

    run(step, name="triton_attention", backend="torch", args=args, check=check)


if __name__ == "__main__":
    main()
