"""Large-vocabulary cross-entropy with user Triton kernels, next to PyTorch's, in bf16.

The loss head of a language-model training step: 8192 tokens (4 sequences of 2048) of bf16
logits over a 50304-entry vocabulary (GPT-2's 50257 padded to a multiple of 64), int64
targets with about 5 % padding positions set to the ignore index -100, mean over the
non-ignored tokens. The logits are a leaf tensor here, and one step produces the loss and
the gradient with respect to the logits.

The user version is a ``torch.autograd.Function``. Forward: one program per row walks the
vocabulary in blocks of 1024 with a running maximum and a rescaled running sum of
exponentials (online softmax, float32), then writes the row's loss (log-sum-exp minus the
target logit, 0 for ignored rows) and its log-sum-exp; the mean is taken in PyTorch.
Backward: one program per row walks the vocabulary again and writes
(softmax - one_hot(target)) * grad / n_valid into a new bf16 gradient tensor. The control is
``torch.nn.functional.cross_entropy`` forward and backward on a copy of the same logits.

``--fused`` computes the gradient inside the forward kernel (a second loop over the row after
the log-sum-exp is known, already divided by the number of valid tokens), saves it, and the
backward returns it, multiplied by the incoming gradient only when that is not 1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

IGNORE_INDEX = -100
BLOCK = 1024


@triton.jit
def ce_fwd_kernel(logits_ptr, target_ptr, loss_ptr, lse_ptr, n_cols, stride_row,
                  ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row * stride_row
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_row = tl.max(m, axis=0)
    lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))
    target = tl.load(target_ptr + row)
    valid = target != ignore_index
    x_t = tl.load(row_ptr + target, mask=valid, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))
    tl.store(lse_ptr + row, lse)


@triton.jit
def ce_bwd_kernel(logits_ptr, target_ptr, lse_ptr, grad_out_ptr, n_valid_ptr, grad_ptr,
                  n_cols, stride_row, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    target = tl.load(target_ptr + row)
    lse = tl.load(lse_ptr + row)
    scale = tl.load(grad_out_ptr) / tl.load(n_valid_ptr).to(tl.float32)
    scale = tl.where(target != ignore_index, scale, 0.0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(logits_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp(x - lse)
        p = tl.where(cols == target, p - 1.0, p)
        tl.store(grad_ptr + row * stride_row + cols, (p * scale).to(grad_ptr.dtype.element_ty),
                 mask=mask)


@triton.jit
def ce_fwd_grad_kernel(logits_ptr, target_ptr, loss_ptr, n_valid_ptr, grad_ptr, n_cols,
                       stride_row, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row * stride_row
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_row = tl.max(m, axis=0)
    lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))
    target = tl.load(target_ptr + row)
    valid = target != ignore_index
    x_t = tl.load(row_ptr + target, mask=valid, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))

    scale = tl.where(valid, 1.0 / tl.load(n_valid_ptr).to(tl.float32), 0.0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp(x - lse)
        p = tl.where(cols == target, p - 1.0, p)
        tl.store(grad_ptr + row * stride_row + cols, (p * scale).to(grad_ptr.dtype.element_ty),
                 mask=mask)


class TritonCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        n_rows, n_cols = logits.shape
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        lse = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        ce_fwd_kernel[(n_rows,)](logits, target, loss, lse, n_cols, logits.stride(0),
                                 IGNORE_INDEX, BLOCK=BLOCK)
        n_valid = (target != IGNORE_INDEX).sum()
        ctx.save_for_backward(logits, target, lse, n_valid)
        return loss.sum() / n_valid

    @staticmethod
    def backward(ctx, grad_out):
        logits, target, lse, n_valid = ctx.saved_tensors
        n_rows, n_cols = logits.shape
        grad = torch.empty_like(logits)
        ce_bwd_kernel[(n_rows,)](logits, target, lse, grad_out, n_valid, grad, n_cols,
                                 logits.stride(0), IGNORE_INDEX, BLOCK=BLOCK)
        return grad, None


class FusedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        n_rows, n_cols = logits.shape
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        grad = torch.empty_like(logits)
        n_valid = (target != IGNORE_INDEX).sum()
        ce_fwd_grad_kernel[(n_rows,)](logits, target, loss, n_valid, grad, n_cols,
                                      logits.stride(0), IGNORE_INDEX, BLOCK=BLOCK)
        ctx.save_for_backward(grad)
        return loss.sum() / n_valid

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        if not torch.equal(grad_out, torch.tensor(1.0, device=grad_out.device)):
            grad = grad * grad_out
        return grad, None


TOKENS, VOCAB, REAL_VOCAB = 8192, 50304, 50257


def main():
    p = parser(__doc__)
    p.add_argument("--fused", action="store_true",
                   help="gradient computed in the forward kernel")
    args = p.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    if VOCAB < BLOCK:
        raise SystemExit("vocabulary smaller than one block")
    logits = (2.0 * torch.randn(TOKENS, VOCAB, device=dev)).bfloat16().requires_grad_()
    target = torch.randint(0, REAL_VOCAB, (TOKENS,), device=dev)
    target[torch.rand(TOKENS, device=dev) < 0.05] = IGNORE_INDEX
    logits_ref = logits.detach().clone().requires_grad_()
    ce = FusedCrossEntropy if args.fused else TritonCrossEntropy
    out = {}

    def step():
        logits.grad = None
        logits_ref.grad = None
        loss = ce.apply(logits, target)
        loss.backward()
        loss_ref = F.cross_entropy(logits_ref, target, ignore_index=IGNORE_INDEX)
        loss_ref.backward()
        out["loss"], out["loss_ref"] = loss.detach(), loss_ref.detach()

    def check():
        rows = slice(0, 512)
        x = logits.detach()[rows].float()
        t = target[rows]
        n_valid = int((target != IGNORE_INDEX).sum())
        ref_loss = F.cross_entropy(logits.detach().float(), target, ignore_index=IGNORE_INDEX)
        for name, got in (("triton", out["loss"]), ("torch", out["loss_ref"])):
            # the loss comes back in the logits' dtype (bf16: 8 bits of mantissa)
            err = abs(float(got) - float(ref_loss)) / abs(float(ref_loss))
            if not err < 1e-2:
                raise AssertionError(f"{name} loss {float(got):.6f}, float32 "
                                     f"{float(ref_loss):.6f}")
        ref_grad = torch.softmax(x, dim=1)
        ok = t != IGNORE_INDEX
        ref_grad[ok, t[ok]] -= 1.0
        ref_grad[~ok] = 0.0
        ref_grad /= n_valid
        scale = ref_grad.abs().max()
        for name, got in (("triton", logits.grad), ("torch", logits_ref.grad)):
            err = float((got[rows].float() - ref_grad).abs().max() / scale)
            if not err < 2e-2:
                raise AssertionError(f"{name} gradient: relative error {err:.3g}")

    run(step, name="triton_cross_entropy", backend="torch", args=args,
        variant="fused" if args.fused else "baseline", check=check)


if __name__ == "__main__":
    main()
