"""A PyTorch program this project did not write the kernels of: cuBLAS, cuDNN, CUB, flash
attention and PyTorch's own kernels, under nested NVTX ranges (``model/block/op``).

It mixes ordinary, well-tuned library work with a few real, caller-fixable problems, so advice can
be judged launch by launch: an FP32 GEMM with TF32 disabled (precision), an eager chain of
elementwise ops on one tensor (fusion), an elementwise op on a strided view and a transpose copy
(coalescing), and a loop of tiny launches (launch shape).
"""

import torch
import torch.nn.functional as F

nvtx = torch.cuda.nvtx
torch.manual_seed(0)
dev = "cuda"
# PyTorch's default for matmuls: no TF32 (cuDNN convolutions do allow it by default).
torch.backends.cuda.matmul.allow_tf32 = False

x = torch.randn(8192, 4096, device=dev)                    # 128 MiB fp32
w = torch.randn(4096, 4096, device=dev)
xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
img = torch.randn(32, 64, 56, 56, device=dev)
conv_w = torch.randn(128, 64, 3, 3, device=dev)
img_cl = img.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
conv_w_cl = conv_w.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
q = torch.randn(16, 16, 2048, 128, device=dev, dtype=torch.bfloat16)
k, v = torch.randn_like(q), torch.randn_like(q)
table = torch.randn(200_000, 256, device=dev)
bags = torch.randint(0, 200_000, (65536,), device=dev)
offsets = torch.arange(0, 65536, 16, device=dev)
keys = torch.rand(1 << 24, device=dev)
big = torch.randn(1 << 27, device=dev)                     # 512 MiB
ln = torch.nn.LayerNorm(4096, device=dev)
torch.cuda.synchronize()


def step():
    """One pass over every op, under nested NVTX ranges."""
    nvtx.range_push("model")
    nvtx.range_push("block0")
    nvtx.range_push("linear_fp32")
    h = x @ w                                                   # FP32 GEMM, TF32 off
    nvtx.range_pop()
    nvtx.range_push("linear_bf16")
    hb = xb @ wb                                                # BF16 tensor-core GEMM
    nvtx.range_pop()
    nvtx.range_push("act_eager")
    a = h * torch.sigmoid(h)                                    # SiLU written as separate ops
    a = a + 1.0
    a = a * 0.5
    nvtx.range_pop()
    nvtx.range_push("layernorm")
    n = ln(a)
    nvtx.range_pop()
    nvtx.range_push("softmax")
    s = torch.softmax(n, dim=-1)
    nvtx.range_pop()
    nvtx.range_pop()  # block0
    nvtx.range_push("attention")
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    nvtx.range_pop()
    nvtx.range_push("conv")
    c = F.conv2d(img, conv_w, padding=1)                       # FP32 NCHW (cuDNN, TF32 allowed)
    cb = F.conv2d(img_cl, conv_w_cl, padding=1)                # BF16 channels-last
    nvtx.range_pop()
    nvtx.range_pop()  # model

    nvtx.range_push("data")
    nvtx.range_push("embedding_bag")
    e = F.embedding_bag(bags, table, offsets, mode="sum")
    nvtx.range_pop()
    nvtx.range_push("sort")
    sk, si = torch.sort(keys)                                   # CUB radix sort, several passes
    nvtx.range_pop()
    nvtx.range_push("cumsum")
    cs = torch.cumsum(big, 0)
    nvtx.range_pop()
    nvtx.range_push("transpose")
    t = x.t().contiguous()
    nvtx.range_pop()
    nvtx.range_push("strided_view")
    sv = x[:, ::8] * 2.0                                        # every 8th column of a row-major matrix
    nvtx.range_pop()
    nvtx.range_push("add")
    y = big + big
    nvtx.range_pop()
    nvtx.range_push("reduce")
    r = x.sum(dim=0)
    nvtx.range_pop()
    nvtx.range_push("tiny_loop")
    acc = torch.zeros(64, device=dev)
    for i in range(4):
        acc = acc + i                                           # 64-element launches
    nvtx.range_pop()
    nvtx.range_pop()  # data
    return s, o, c, cb, e, sk, cs, t, sv, y, r, acc, hb


step()  # warm-up: cuBLAS/cuDNN heuristics and PyTorch's lazy init stay outside the profiled range
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
result = step()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("torch_ops:", [round(float(t.float().sum()), 3) for t in result])
