"""Before/after for ``diff``: a two-layer FP32 MLP step, with TF32 off (PyTorch's default for
matmuls) or on (``--tf32``). cuBLAS picks another kernel, with another name, when TF32 is on."""

import sys

import torch

tf32 = "--tf32" in sys.argv
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.manual_seed(0)
x = torch.randn(8192, 4096, device="cuda")
w1 = torch.randn(4096, 4096, device="cuda") * 0.01
w2 = torch.randn(4096, 1024, device="cuda") * 0.01


def step():
    """Forward pass and a scalar loss, under one NVTX range."""
    torch.cuda.nvtx.range_push("mlp")
    h = torch.relu(x @ w1)
    y = h @ w2
    loss = y.square().mean()
    torch.cuda.nvtx.range_pop()
    return loss


step()  # warm-up: cuBLAS picks and loads its kernels outside the profiled range
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
loss = step()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print(f"torch_tf32: tf32={tf32} loss={loss.item():.6f}")
