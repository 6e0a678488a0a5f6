"""LayerNorm forward and backward with user Triton kernels, next to PyTorch's own, in fp16.

Activations of 16384 rows (8 sequences of 2048 tokens) x 4096 features, fp16, with fp16
weight and bias, wrapped in a ``torch.autograd.Function`` as in the Triton tutorial.
Forward: one program per row keeps the row in registers, writes y and the float32 mean and
1/std of the row. Backward: one program per row computes dx and adds its row's contribution
to dw and db into one of GROUP_SIZE_M partial buffers (fp16, GROUP_SIZE_M x 4096), taking a
spin lock (``atomic_cas``) on that buffer for the read-modify-write; a second kernel sums
the partial buffers over their rows into dw and db (one program per 128 columns).
``torch.nn.functional.layer_norm`` forward and backward on a copy of the same tensors is
the control, and the two must agree.
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
def ln_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask)
    b = tl.load(B + cols, mask=mask)
    y = xc * rstd * w + b
    tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def ln_bwd_dx_kernel(DX, DY, DW_part, DB_part, X, W, Mean, Rstd, Lock, stride, N,
                     GROUP_SIZE_M: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = tl.where(mask, w * dy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + row * stride + cols, dx.to(DX.dtype.element_ty), mask=mask)

    # this row's share of dw and db goes into partial buffer row % GROUP_SIZE_M
    group = row % GROUP_SIZE_M
    lock = Lock + group
    count = Lock + GROUP_SIZE_M + group
    dw_ptrs = DW_part + group * N + cols
    db_ptrs = DB_part + group * N + cols
    part_dw = (dy * xhat).to(W.dtype.element_ty)
    part_db = dy.to(W.dtype.element_ty)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    if tl.load(count) == 0:                  # first row of this group: nothing to add to
        tl.atomic_xchg(count, 1)
    else:
        part_dw += tl.load(dw_ptrs, mask=mask)
        part_db += tl.load(db_ptrs, mask=mask)
    tl.store(dw_ptrs, part_dw, mask=mask)
    tl.store(db_ptrs, part_db, mask=mask)
    tl.atomic_xchg(lock, 0)


@triton.jit
def ln_bwd_dwdb_kernel(DW_part, DB_part, DW, DB, M, N,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_M):
        rows = i + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW_part + offs, mask=mask, other=0.0).to(tl.float32)
        db += tl.load(DB_part + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(DW + cols, tl.sum(dw, axis=0).to(DW.dtype.element_ty), mask=cols < N)
    tl.store(DB + cols, tl.sum(db, axis=0).to(DB.dtype.element_ty), mask=cols < N)


class TritonLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        x2 = x.reshape(-1, x.shape[-1])
        M, N = x2.shape
        y = torch.empty_like(x2)
        mean = torch.empty(M, dtype=torch.float32, device=x.device)
        rstd = torch.empty(M, dtype=torch.float32, device=x.device)
        BLOCK_N = triton.next_power_of_2(N)
        if N * x.element_size() > 65536:
            raise RuntimeError("feature dimension over 64 KB is not supported")
        num_warps = min(max(BLOCK_N // 256, 1), 8)
        ln_fwd_kernel[(M,)](x2, y, weight, bias, mean, rstd, x2.stride(0), N, eps,
                            BLOCK_N=BLOCK_N, num_warps=num_warps)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.BLOCK_N, ctx.num_warps, ctx.x_shape = BLOCK_N, num_warps, x.shape
        return y.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        x2, w, mean, rstd = ctx.saved_tensors
        M, N = x2.shape
        dy = dy.reshape(-1, N).contiguous()
        GROUP_SIZE_M = 64
        if N <= 8192:
            GROUP_SIZE_M = 96
        if N <= 4096:
            GROUP_SIZE_M = 128
        if N <= 1024:
            GROUP_SIZE_M = 256
        locks = torch.zeros(2 * GROUP_SIZE_M, dtype=torch.int32, device=w.device)
        dw_part = torch.empty((GROUP_SIZE_M, N), dtype=x2.dtype, device=w.device)
        db_part = torch.empty((GROUP_SIZE_M, N), dtype=x2.dtype, device=w.device)
        dw = torch.empty_like(w)
        db = torch.empty_like(w)
        dx = torch.empty_like(dy)
        ln_bwd_dx_kernel[(M,)](dx, dy, dw_part, db_part, x2, w, mean, rstd, locks,
                               x2.stride(0), N, GROUP_SIZE_M=GROUP_SIZE_M,
                               BLOCK_N=ctx.BLOCK_N, num_warps=ctx.num_warps)
        BLOCK_COLS = 128
        ln_bwd_dwdb_kernel[(triton.cdiv(N, BLOCK_COLS),)](dw_part, db_part, dw, db,
                                                          min(GROUP_SIZE_M, M), N,
                                                          BLOCK_M=32, BLOCK_N=BLOCK_COLS)
        return dx.view(ctx.x_shape), dw, db, None


def layer_norm(x, weight, bias, eps=1e-5):
    return TritonLayerNorm.apply(x, weight, bias, eps)


M_ROWS, N_COLS, EPS = 16384, 4096, 1e-5


def main():
    args = parser(__doc__).parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    x = (-2.3 + 0.5 * torch.randn(M_ROWS, N_COLS, device=dev)).half().requires_grad_()
    w = (1.0 + 0.1 * torch.randn(N_COLS, device=dev)).half().requires_grad_()
    b = (0.1 * torch.randn(N_COLS, device=dev)).half().requires_grad_()
    dy = (0.1 * torch.randn(M_ROWS, N_COLS, device=dev)).half()
    x_ref, w_ref, b_ref = (t.detach().clone().requires_grad_() for t in (x, w, b))
    out = {}

    def step():
        for t in (x, w, b, x_ref, w_ref, b_ref):
            t.grad = None
        y = layer_norm(x, w, b, EPS)
        y.backward(dy)
        y_ref = F.layer_norm(x_ref, (N_COLS,), w_ref, b_ref, EPS)
        y_ref.backward(dy)
        out["y"], out["y_ref"] = y.detach(), y_ref.detach()

    def check():
        torch.testing.assert_close(out["y"], out["y_ref"], rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-2, atol=1e-2)
        for name, got, ref in (("dw", w.grad, w_ref.grad), ("db", b.grad, b_ref.grad)):
            err = float((got.float() - ref.float()).abs().max() / ref.float().abs().max())
            if not err < 2e-2:
                raise AssertionError(f"{name}: relative error {err:.3g}")

    run(step, name="triton_layernorm_bwd", backend="torch", args=args, check=check)


if __name__ == "__main__":
    main()
