"""Triton kernels from a user's LLM-training code base, run through PyTorch.

Cross-entropy loss over a 32000-token vocabulary (4096 rows of bf16 logits, one program per
row looping over the vocabulary: max, then sum of exponentials, then the target's logit);
RMSNorm of 8192 x 5120 bf16 activations, one program per row; rotary position embedding
applied in place to a (8, 2048, 32, 128) bf16 query tensor, one program per token; a
4096^3 fp16 matmul with tl.dot in two tile configurations (32 x 32 x 32 with one stage, and
128 x 128 x 64 with three stages and grouped ordering); and a residual add of 2^26 floats.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DEV, parser, run  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def cross_entropy_fwd_kernel(logits_ptr, target_ptr, loss_ptr, n_cols, stride_row,
                             BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row.to(tl.int64) * stride_row
    m_acc = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_acc = tl.maximum(m_acc, x)
    m = tl.max(m_acc, axis=0)
    s_acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        s_acc += tl.exp(x - m)
    s = tl.sum(s_acc, axis=0)
    target = tl.load(target_ptr + row)
    x_t = tl.load(base + target).to(tl.float32)
    tl.store(loss_ptr + row, tl.log(s) + m - x_t)


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * w
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rotary_kernel(q_ptr, cos_ptr, sin_ptr, seq_len, stride_b, stride_t, stride_h,
                  N_HEADS: tl.constexpr, HALF: tl.constexpr):
    # program = one (batch, position); all heads of that token
    pid = tl.program_id(0)
    b = pid // seq_len
    t = pid % seq_len
    heads = tl.arange(0, N_HEADS)
    dims = tl.arange(0, HALF)
    base = q_ptr + b * stride_b + t * stride_t
    offs = heads[:, None] * stride_h + dims[None, :]
    x1 = tl.load(base + offs).to(tl.float32)
    x2 = tl.load(base + offs + HALF).to(tl.float32)
    c = tl.load(cos_ptr + t * HALF + dims)[None, :]
    s = tl.load(sin_ptr + t * HALF + dims)[None, :]
    tl.store(base + offs, (x1 * c - x2 * s).to(q_ptr.dtype.element_ty))
    tl.store(base + offs + HALF, (x2 * c + x1 * s).to(q_ptr.dtype.element_ty))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
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

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


CE_ROWS, VOCAB = 4096, 32000
RMS_ROWS, RMS_COLS = 8192, 5120
RB, RT, RH, RD = 8, 2048, 32, 128
MM = 4096
VEC_N = 1 << 26
EPS = 1e-6


def cross_entropy(logits, target, loss):
    cross_entropy_fwd_kernel[(logits.shape[0],)](logits, target, loss, logits.shape[1],
                                                 logits.stride(0), BLOCK=4096, num_warps=8)


def rmsnorm(x, w, out):
    rmsnorm_kernel[(x.shape[0],)](x, w, out, x.shape[1], x.stride(0), EPS,
                                  BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=4)


def rotary_(q, cos, sin):
    b, t, h, d = q.shape
    rotary_kernel[(b * t,)](q, cos, sin, t, q.stride(0), q.stride(1), q.stride(2),
                            N_HEADS=h, HALF=d // 2, num_warps=4)


def matmul(a, b, c, bm, bn, bk, group_m, num_warps, num_stages):
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                        GROUP_M=group_m, num_warps=num_warps, num_stages=num_stages)


def add(x, y, out):
    n = x.numel()
    add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK_SIZE=128)


def rope_tables(t, d, device):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    ang = torch.arange(t, device=device, dtype=torch.float32)[:, None] * inv[None, :]
    return ang.cos().contiguous(), ang.sin().contiguous()


def rope_reference(q, cos, sin):
    x = q.float()
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def main():
    args = parser(__doc__).parse_args()
    dev = DEV
    gen = torch.Generator(device=dev)
    gen.manual_seed(31)
    bf16, fp16 = torch.bfloat16, torch.float16

    logits = (torch.randn(CE_ROWS, VOCAB, device=dev, generator=gen) * 2).to(bf16)
    target = torch.randint(0, VOCAB, (CE_ROWS,), device=dev, generator=gen)
    loss = torch.empty(CE_ROWS, device=dev)
    hid = torch.randn(RMS_ROWS, RMS_COLS, device=dev, generator=gen).to(bf16)
    rms_w = (torch.rand(RMS_COLS, device=dev, generator=gen) + 0.5).to(bf16)
    hid_out = torch.empty_like(hid)
    q = torch.randn(RB, RT, RH, RD, device=dev, generator=gen).to(bf16)
    q0 = q.clone()
    cos, sin = rope_tables(RT, RD, dev)
    a = (torch.rand(MM, MM, device=dev, generator=gen) - 0.5).to(fp16)
    b = (torch.rand(MM, MM, device=dev, generator=gen) - 0.5).to(fp16)
    c_small = torch.empty(MM, MM, device=dev, dtype=fp16)
    c_big = torch.empty(MM, MM, device=dev, dtype=fp16)
    resid = torch.randn(VEC_N, device=dev, generator=gen)
    upd = torch.randn(VEC_N, device=dev, generator=gen)
    resid_out = torch.empty_like(resid)

    def step():
        cross_entropy(logits, target, loss)
        rmsnorm(hid, rms_w, hid_out)
        q.copy_(q0)                  # the rotation is in place: start from the same q
        rotary_(q, cos, sin)
        matmul(a, b, c_small, 32, 32, 32, 1, 4, 1)
        matmul(a, b, c_big, 128, 128, 64, 8, 8, 3)
        add(resid, upd, resid_out)

    def expect_close(name, got, ref, rtol, atol):
        try:
            torch.testing.assert_close(got, ref, rtol=rtol, atol=atol)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None

    def check():
        if dev == "cuda":
            torch.cuda.synchronize()
        expect_close("cross_entropy_fwd_kernel", loss,
                     F.cross_entropy(logits.float(), target, reduction="none"), 1e-4, 1e-4)
        ref = (hid.float() * torch.rsqrt(hid.float().pow(2).mean(-1, keepdim=True) + EPS)
               * rms_w.float())
        expect_close("rmsnorm_kernel", hid_out.float(), ref, 2e-2, 2e-2)
        expect_close("rotary_kernel", q.float(), rope_reference(q0, cos, sin), 2e-2, 2e-2)
        ref = (a.float() @ b.float())
        expect_close("matmul 32x32x32", c_small.float(), ref, 1e-2, 1e-2)
        expect_close("matmul 128x128x64", c_big.float(), ref, 1e-2, 1e-2)
        expect_close("add_kernel", resid_out, resid + upd, 0, 0)

    run(step, name="triton_ops", backend="torch", args=args, check=check)


if __name__ == "__main__":
    main()
