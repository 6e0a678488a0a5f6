"""A second PyTorch program for scoring advice on held-out data (kernels this project did not
write: cuBLAS, cuDNN, PyTorch's own, and Triton from torch.compile).

Written after the rules were last changed, and scored without changing them (BENCHMARKS
section 5, `tests/data/holdout_labels.toml`). Like a real user's step it mixes well-tuned library
work with things a caller could fix: attention written by hand in FP32 with TF32 off, a GELU
written as separate elementwise ops, a histogram through global atomics (index_add_ into 64
bins), elementwise work on a strided view and a 2-D transpose copy.

``--iters N`` repeats the step (a larger report for the reading benchmark).
"""

import argparse
import math

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1)
args = parser.parse_args()

nvtx = torch.cuda.nvtx
torch.manual_seed(0)
dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default for matmuls

BH, S, D = 64, 1024, 64
q = torch.randn(BH, S, D, device=dev)
k = torch.randn(BH, S, D, device=dev)
v = torch.randn(BH, S, D, device=dev)
causal = torch.ones(S, S, device=dev, dtype=torch.bool).triu(1)
x = torch.randn(16384, 2048, device=dev)                    # 128 MiB fp32
xh = x.half()
wh = torch.randn(2048, 2048, device=dev, dtype=torch.half)
vals = torch.randn(1 << 24, device=dev)
bins = torch.randint(0, 64, (1 << 24,), device=dev)
hist = torch.zeros(64, device=dev)
emb = torch.nn.Embedding(50_000, 1024, device=dev)
tokens = torch.randint(0, 50_000, (32768,), device=dev)
big = torch.randn(4096, 16384, device=dev)                  # 256 MiB fp32
gn = torch.nn.GroupNorm(32, 256, device=dev)
img = torch.randn(32, 256, 32, 32, device=dev)
conv_w = torch.randn(256, 256, 3, 3, device=dev)


@torch.compile
def gelu_compiled(t):
    return 0.5 * t * (1.0 + torch.tanh(0.7978845608 * (t + 0.044715 * t * t * t)))


def step():
    nvtx.range_push("attention_fp32")
    s = torch.bmm(q, k.transpose(1, 2))                     # FP32 batched GEMM, TF32 off
    s = s * (1.0 / math.sqrt(D))
    s = s.masked_fill(causal, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.bmm(p, v)
    nvtx.range_pop()
    nvtx.range_push("mlp_fp16")
    h = xh @ wh                                             # FP16 tensor-core GEMM
    nvtx.range_pop()
    nvtx.range_push("gelu_eager")
    g = 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3))))
    nvtx.range_pop()
    nvtx.range_push("gelu_compiled")
    gc = gelu_compiled(x)
    nvtx.range_pop()
    nvtx.range_push("histogram")
    hist.index_add_(0, bins, vals)                          # global atomics into 64 bins
    counts = torch.bincount(bins, minlength=64)
    nvtx.range_pop()
    nvtx.range_push("embedding")
    e = emb(tokens)
    nvtx.range_pop()
    nvtx.range_push("layout")
    y = x[:, ::2] * 2.0                                     # elementwise on a stride-2 view
    t = big.t().contiguous()                                # 2-D transpose copy
    r = big.sum(dim=1)
    nvtx.range_pop()
    nvtx.range_push("conv_groupnorm")
    c = F.conv2d(img, conv_w, padding=1)                    # cuDNN (TF32 allowed for convs)
    n = gn(c)
    nvtx.range_pop()
    return o, h, g, gc, counts, e, y, t, r, n


for _ in range(2):  # warm-up: torch.compile, cuBLAS/cuDNN heuristics
    step()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(args.iters):
    step()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
