"""Prompt prefill of a 2-layer GPT-style model under ``torch.compile`` (default mode), bf16
weights, batch 4 x 1024 tokens, attention through ``scaled_dot_product_attention``: what an
inference server runs before decoding starts.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
B, T, D, H, V = 4, 1024, 1024, 16, 32000


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).unbind(2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(B, T, D))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.Sequential(Block(), Block())
        self.ln = nn.LayerNorm(D)

    def forward(self, idx):
        x = self.ln(self.blocks(self.emb(idx)))
        return x[:, -1] @ self.emb.weight.t()               # logits of the last position


model = Model().to(dev, torch.bfloat16).eval()
compiled = torch.compile(model)
idx = torch.randint(0, V, (B, T), device=dev)


@torch.inference_mode()
def step():
    compiled(idx)


run(step, name="torch_prefill_compiled", backend="torch", args=args)
