"""A small PyTorch program with NVTX ranges: real framework kernels for the NVTX export forms."""

import torch

torch.manual_seed(0)
x = torch.randn(4096, 1024, device="cuda")
layer = torch.nn.Linear(1024, 1024, device="cuda")
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("forward")
h = torch.relu(layer(x))
y = torch.softmax(h, dim=-1)
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_push("loss")
loss = (y * y).sum()
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"torch_mlp: loss = {loss.item():.6f}")
