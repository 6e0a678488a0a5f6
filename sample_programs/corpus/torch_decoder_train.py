"""One training step of a small decoder-only transformer written by hand (GPT style).

bf16 autocast, attention spelled out as matmul -> scale -> causal mask -> softmax -> dropout ->
matmul, AdamW with PyTorch's default (foreach) implementation. ``--sdpa`` switches attention to
``F.scaled_dot_product_attention``; ``--fused-adam`` uses ``AdamW(fused=True)``.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--sdpa", action="store_true")
p.add_argument("--fused-adam", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, T, D, H, V, LAYERS = 8, 512, 768, 12, 8192, 1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril())

    def attention(self, x):
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        if args.sdpa:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
            att = att.masked_fill(~self.mask, float("-inf"))
            att = F.dropout(torch.softmax(att, dim=-1), p=0.1)
            o = att @ v
        return self.proj(o.transpose(1, 2).contiguous().view(B, T, D))

    def forward(self, x):
        x = x + F.dropout(self.attention(self.ln1(x)), p=0.1)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), p=0.1)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


model = Decoder().to(dev).train()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=args.fused_adam)
idx = torch.randint(0, V, (B, T), device=dev)
target = torch.randint(0, V, (B, T), device=dev)


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev, dtype=torch.bfloat16):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, V).float(), target.view(-1))
    loss.backward()
    opt.step()


variant = "+".join(v for v, on in (("sdpa", args.sdpa), ("fused_adam", args.fused_adam)) if on)
run(step, name="torch_decoder_train", backend="torch", args=args, variant=variant or "baseline")
