"""Inference of one mixture-of-experts feed-forward layer (Mixtral-style top-2 routing), bf16.

4096 tokens (batch 8 x 512) of width 1024, 4 experts with a GELU MLP of width 4096, the
expert weights stored stacked as (experts, in, out). A linear router scores the experts, a
float32 softmax and ``topk`` pick two per token and renormalise their weights. By default
the layer loops over the experts in Python, as the reference implementations do: the tokens
routed to an expert are found with ``torch.where``, gathered, run through its MLP, weighted
and added back with ``index_add_``. ``--batched`` groups the token copies by expert with one
sort, pads every group to the largest one and runs all experts at once with ``torch.bmm``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--batched", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, S, D, FF, E, TOPK = 8, 512, 1024, 4096, 4, 2


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D, E, bias=False)
        self.w1 = nn.Parameter(torch.randn(E, D, FF) * D ** -0.5)
        self.w2 = nn.Parameter(torch.randn(E, FF, D) * FF ** -0.5)

    def route(self, x):
        probs = F.softmax(self.router(x), dim=-1, dtype=torch.float32)
        topw, topi = torch.topk(probs, TOPK, dim=-1)
        topw = topw / topw.sum(dim=-1, keepdim=True)
        return topw.to(x.dtype), topi

    def forward_loop(self, x):
        topw, topi = self.route(x)
        out = torch.zeros_like(x)
        for e in range(E):
            token_idx, slot = torch.where(topi == e)
            if token_idx.numel() == 0:
                continue
            h = F.gelu(x[token_idx] @ self.w1[e])
            y = (h @ self.w2[e]) * topw[token_idx, slot, None]
            out.index_add_(0, token_idx, y)
        return out

    def forward_batched(self, x):
        topw, topi = self.route(x)
        n = x.shape[0]
        flat_e = topi.flatten()
        order = torch.argsort(flat_e, stable=True)
        sorted_e = flat_e[order]
        tok = order // TOPK
        counts = torch.bincount(flat_e, minlength=E)
        cap = int(counts.max())
        starts = torch.cumsum(counts, 0) - counts
        pos = torch.arange(n * TOPK, device=x.device) - starts[sorted_e]
        buf = x.new_zeros(E, cap, D)
        buf[sorted_e, pos] = x[tok]
        h = F.gelu(torch.bmm(buf, self.w1))
        y = torch.bmm(h, self.w2)[sorted_e, pos] * topw.flatten()[order, None]
        return torch.zeros_like(x).index_add_(0, tok, y)

    def forward(self, x):
        return self.forward_batched(x) if args.batched else self.forward_loop(x)


model = MoE().to(dev, torch.bfloat16).eval()
x = torch.randn(B * S, D, device=dev, dtype=torch.bfloat16)
out = {}


@torch.inference_mode()
def step():
    out["y"] = x + model(x)


@torch.inference_mode()
def check():
    a = model.forward_loop(x).float()
    b = model.forward_batched(x).float()
    torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)


run(step, name="torch_moe_infer", backend="torch", args=args, check=check,
    variant="batched" if args.batched else "baseline")
