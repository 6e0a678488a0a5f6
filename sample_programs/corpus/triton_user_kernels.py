"""Hand-written Triton kernels of the kind found in user model code, run through PyTorch.

Row softmax (8192 x 1000) and fused LayerNorm forward (8192 x 4096), one program per row;
an elementwise scale of an 8192 x 8192 matrix tiled down columns and over contiguous
blocks; a 2048^3 matmul with tl.dot in fp32 (ieee), fp32 (tf32) and bf16; and a sum of
2^25 floats through per-block atomics next to a plain vector add.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_out + cols, num / den, mask=mask)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride + cols, xc * rstd * w + b, mask=mask)


@triton.jit
def scale_columns_kernel(x_ptr, out_ptr, n_rows, n_cols, scale, BLOCK_R: tl.constexpr):
    # program (col, row block): BLOCK_R consecutive rows of one column
    col = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    mask = rows < n_rows
    offs = rows * n_cols + col
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)


@triton.jit
def scale_flat_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, INPUT_PRECISION: tl.constexpr):
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
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def sum_atomic_kernel(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(total_ptr, tl.sum(x, axis=0))


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


SM_ROWS, SM_COLS = 8192, 1000
LN_ROWS, LN_COLS = 8192, 4096
SC_N = 8192
MM = 2048
VEC_N = 1 << 25
SCALE = 0.5
EPS = 1e-5


def main():
    args = parser(__doc__).parse_args()

    dev = "cuda"
    gen = torch.Generator(device=dev)
    gen.manual_seed(2024)

    sm_x = torch.randn(SM_ROWS, SM_COLS, device=dev, generator=gen) * 3.0
    sm_out = torch.empty_like(sm_x)
    ln_x = torch.randn(LN_ROWS, LN_COLS, device=dev, generator=gen) * 2.0 + 0.5
    ln_w = torch.rand(LN_COLS, device=dev, generator=gen) + 0.5
    ln_b = torch.randn(LN_COLS, device=dev, generator=gen) * 0.1
    ln_out = torch.empty_like(ln_x)
    sc_x = torch.randn(SC_N, SC_N, device=dev, generator=gen)
    sc_out = torch.empty_like(sc_x)                  # written by both scale kernels
    mm_a = torch.rand(MM, MM, device=dev, generator=gen) * 2 - 1
    mm_b = torch.rand(MM, MM, device=dev, generator=gen) * 2 - 1
    mm_a16 = mm_a.to(torch.bfloat16)
    mm_b16 = mm_b.to(torch.bfloat16)
    c_ieee = torch.empty(MM, MM, device=dev)
    c_tf32 = torch.empty(MM, MM, device=dev)
    c_bf16 = torch.empty(MM, MM, device=dev)
    vx = torch.rand(VEC_N, device=dev, generator=gen)
    vy = torch.rand(VEC_N, device=dev, generator=gen)
    vsum = torch.zeros(1, device=dev)
    vout = torch.empty_like(vx)

    BLOCK_R = 512
    SC_BLOCK = 1024
    MM_BM, MM_BN, MM_BK = 128, 128, 32
    SUM_BLOCK = 2048

    def scale_columns():
        scale_columns_kernel[(SC_N, triton.cdiv(SC_N, BLOCK_R))](
            sc_x, sc_out, SC_N, SC_N, SCALE, BLOCK_R=BLOCK_R, num_warps=4)

    def scale_flat():
        n = sc_x.numel()
        scale_flat_kernel[(triton.cdiv(n, SC_BLOCK),)](sc_x, sc_out, n, SCALE, BLOCK=SC_BLOCK,
                                                      num_warps=4)

    def matmul(a, b, c, precision):
        grid = (triton.cdiv(MM, MM_BM) * triton.cdiv(MM, MM_BN),)
        matmul_kernel[grid](a, b, c, MM, MM, MM,
                            a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1),
                            BLOCK_M=MM_BM, BLOCK_N=MM_BN, BLOCK_K=MM_BK, GROUP_M=8,
                            INPUT_PRECISION=precision, num_warps=8, num_stages=3)

    def step():
        softmax_kernel[(SM_ROWS,)](sm_x, sm_out, SM_COLS, sm_x.stride(0), sm_out.stride(0),
                                   BLOCK=triton.next_power_of_2(SM_COLS), num_warps=4)
        layernorm_kernel[(LN_ROWS,)](ln_x, ln_w, ln_b, ln_out, LN_COLS, ln_x.stride(0), EPS,
                                     BLOCK=triton.next_power_of_2(LN_COLS), num_warps=8)
        scale_columns()
        scale_flat()
        matmul(mm_a, mm_b, c_ieee, "ieee")
        matmul(mm_a, mm_b, c_tf32, "tf32")
        matmul(mm_a16, mm_b16, c_bf16, "ieee")      # precision setting only affects fp32 operands
        vsum.zero_()
        sum_atomic_kernel[(triton.cdiv(VEC_N, SUM_BLOCK),)](vx, vsum, VEC_N, BLOCK=SUM_BLOCK,
                                                            num_warps=4)
        add_kernel[(triton.cdiv(VEC_N, 1024),)](vx, vy, vout, VEC_N, BLOCK_SIZE=1024,
                                               num_warps=4)

    def expect_close(name, got, ref, rtol, atol):
        try:
            torch.testing.assert_close(got, ref, rtol=rtol, atol=atol)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None

    def check():
        torch.cuda.synchronize()
        expect_close("softmax_kernel", sm_out, torch.softmax(sm_x, dim=1), 1e-5, 1e-6)
        for r0 in range(0, LN_ROWS, 1024):         # in slices to keep temporaries small
            ref = F.layer_norm(ln_x[r0:r0 + 1024], (LN_COLS,), ln_w, ln_b, EPS)
            expect_close("layernorm_kernel", ln_out[r0:r0 + 1024], ref, 1e-4, 1e-4)

        for name, launch in (("scale_columns_kernel", scale_columns),
                             ("scale_flat_kernel", scale_flat)):
            sc_out.zero_()
            launch()
            torch.cuda.synchronize()
            for r0 in range(0, SC_N, 1024):
                expect_close(name, sc_out[r0:r0 + 1024], sc_x[r0:r0 + 1024] * SCALE, 0, 0)

        ref = torch.matmul(mm_a.double(), mm_b.double()).float()
        expect_close("matmul ieee", c_ieee, ref, 1e-3, 1e-2)
        expect_close("matmul tf32", c_tf32, ref, 2e-2, 1e-1)
        ref = torch.matmul(mm_a16.double(), mm_b16.double()).float()
        expect_close("matmul bf16", c_bf16, ref, 2e-2, 1e-1)
        del ref

        total = float(torch.sum(vx, dtype=torch.float64))
        if abs(float(vsum) - total) > 1e-3 * total:
            raise AssertionError(f"sum_atomic_kernel: {float(vsum)} vs {total}")
        for s0 in range(0, VEC_N, 1 << 22):
            sl = slice(s0, s0 + (1 << 22))
            expect_close("add_kernel", vout[sl], vx[sl] + vy[sl], 0, 0)
        torch.cuda.empty_cache()

    run(step, name="triton_user_kernels", backend="torch", args=args, check=check)


if __name__ == "__main__":
    main()
