"""A 10-step PyTorch training loop as people write it: a small MLP block with LayerNorm and GELU,
cross-entropy loss, AdamW with its default (multi-tensor) implementation, one NVTX range per step.

The loop repeats the same few dozen kernel shapes every step: the case for profiling one launch
per shape instead of every launch (``ncu-advise``'s default census-then-depth profiling).
``--steps N`` changes the number of steps.
"""
import argparse

import torch

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--steps", type=int, default=10)
steps = p.parse_args().steps

torch.manual_seed(0)
dev = "cuda"
d, hidden, classes, batch = 512, 2048, 1000, 256
model = torch.nn.Sequential(
    torch.nn.Linear(d, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, d),
    torch.nn.LayerNorm(d), torch.nn.Linear(d, classes),
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(batch, d, device=dev)
y = torch.randint(0, classes, (batch,), device=dev)
for step in range(steps):
    torch.cuda.nvtx.range_push(f"step {step}")
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"torch_train_loop: {steps} steps, loss {loss.item():.4f}")
