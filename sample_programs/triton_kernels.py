"""Triton-generated kernels (no autotuning, fixed configs): a vector add, a row softmax, a
column sum that reads a row-major matrix down its columns, and a row sum that reads along rows."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def colsum_strided_kernel(in_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    # One program per column: each load walks down a column, one element per row (stride n_cols).
    col = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_rows, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        acc += tl.load(in_ptr + rows * n_cols + col, mask=rows < n_rows, other=0.0)
    tl.store(out_ptr + col, tl.sum(acc, axis=0))


@triton.jit
def rowsum_kernel(in_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


n = 1 << 26
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
out = torch.empty_like(x)
m = torch.randn(16384, 1024, device="cuda")
sm = torch.empty_like(m)
mat = torch.randn(8192, 8192, device="cuda")
colsum = torch.empty(8192, device="cuda")
rowsum = torch.empty(8192, device="cuda")
# Compile and warm up outside the profiled range.
for _ in range(2):
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    softmax_kernel[(m.shape[0],)](sm, m, m.stride(0), m.shape[1], BLOCK=1024)
    colsum_strided_kernel[(8192,)](mat, colsum, 8192, 8192, BLOCK=256)
    rowsum_kernel[(8192,)](mat, rowsum, 8192, BLOCK=1024)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
softmax_kernel[(m.shape[0],)](sm, m, m.stride(0), m.shape[1], BLOCK=1024)
colsum_strided_kernel[(8192,)](mat, colsum, 8192, 8192, BLOCK=256)
rowsum_kernel[(8192,)](mat, rowsum, 8192, BLOCK=1024)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
ok = (torch.allclose(out, x + y) and torch.allclose(sm, torch.softmax(m, -1), atol=1e-5)
      and torch.allclose(colsum, mat.sum(0), rtol=1e-3, atol=1e-2)
      and torch.allclose(rowsum, mat.sum(1), rtol=1e-3, atol=1e-2))
print("triton_kernels: results match torch:", ok)
