"""Inference of a small BERT-style encoder written by hand: a batch of 8 padded sequences of
128 tokens (lengths 64 to 128) through 2 post-LayerNorm blocks of width 512 with 8 heads and
a GELU MLP of width 2048, then the tanh pooler over the first token.

FP32 with PyTorch's default matmul precision (TF32 off). Attention is spelled out as
matmul -> scale -> additive padding mask -> softmax -> dropout (a no-op in eval) -> matmul.
``--sdpa`` uses ``F.scaled_dot_product_attention`` with the same mask; ``--bf16`` runs the
model under ``torch.autocast`` in bfloat16.
"""

import math
import os
import sys
from contextlib import nullcontext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--sdpa", action="store_true")
p.add_argument("--bf16", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, T, D, H, FF, LAYERS, VOCAB = 8, 128, 512, 8, 2048, 2, 30522


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        if args.sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype),
                                                 dropout_p=0.1 if self.training else 0.0)
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H)
            scores = scores + mask
            probs = self.dropout(F.softmax(scores, dim=-1))
            ctx = torch.matmul(probs, v)
        return self.out(ctx.transpose(1, 2).contiguous().view(B, T, D))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = SelfAttention()
        self.ln1 = nn.LayerNorm(D, eps=1e-12)
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)
        self.ln2 = nn.LayerNorm(D, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, mask):
        x = self.ln1(x + self.dropout(self.attn(x, mask)))
        return self.ln2(x + self.dropout(self.fc2(F.gelu(self.fc1(x)))))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(512, D)
        self.token_type = nn.Embedding(2, D)
        self.ln = nn.LayerNorm(D, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.pool = nn.Linear(D, D)

    def forward(self, ids, type_ids, attention_mask):
        pos = torch.arange(T, device=ids.device)
        x = self.ln(self.word(ids) + self.pos(pos) + self.token_type(type_ids))
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        return torch.tanh(self.pool(x[:, 0]))


model = Bert().to(dev).eval()
lengths = torch.randint(64, T + 1, (B,))
attention_mask = (torch.arange(T)[None, :] < lengths[:, None]).long().to(dev)
ids = torch.randint(1000, VOCAB, (B, T), device=dev) * attention_mask
type_ids = (torch.arange(T)[None, :] >= (lengths[:, None] // 2)).long().to(dev) * attention_mask


@torch.inference_mode()
def step():
    with torch.autocast(dev, dtype=torch.bfloat16) if args.bf16 else nullcontext():
        model(ids, type_ids, attention_mask)


variant = "+".join(v for v, on in (("sdpa", args.sdpa), ("bf16", args.bf16)) if on)
run(step, name="torch_bert_infer", backend="torch", args=args, variant=variant or "baseline")
