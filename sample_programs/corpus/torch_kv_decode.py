"""One decode step of a small GPT-style model in bf16 with a KV cache that grows every token.

Batch of 4 sequences, 4 layers, d_model 2048, 16 heads, 12288 cached positions at the start.
Each layer's cache is grown with ``torch.cat`` on every token, the way many hand-written
generation loops do it (a new, one-longer tensor each step: the whole cache is copied).
``--prealloc`` allocates the cache once at its final length and writes the new key and value
into the next slot with a slice assignment, attending over a view of the filled part.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--prealloc", action="store_true",
               help="preallocated cache written in place instead of torch.cat")
args = p.parse_args()
torch.manual_seed(0)
dev, dt = DEV, torch.bfloat16
B, D, H, LAYERS, V, PAST = 4, 2048, 16, 4, 32000, 12288
HD = D // H
MAXLEN = PAST + args.warmup + max(args.time, 1) + 1     # every token this run will decode


class CatCache:
    """Past keys and values, grown by concatenation."""

    def __init__(self):
        self.k = torch.randn(B, H, PAST, HD, device=dev, dtype=dt)
        self.v = torch.randn(B, H, PAST, HD, device=dev, dtype=dt)

    def __len__(self):
        return self.k.shape[2]

    def update(self, k, v):
        self.k = torch.cat([self.k, k], dim=2)
        self.v = torch.cat([self.v, v], dim=2)
        return self.k, self.v


class StaticCache:
    """Past keys and values in buffers of the final length, filled slot by slot."""

    def __init__(self):
        self.k = torch.empty(B, H, MAXLEN, HD, device=dev, dtype=dt)
        self.v = torch.empty(B, H, MAXLEN, HD, device=dev, dtype=dt)
        self.k[:, :, :PAST].normal_()
        self.v[:, :, :PAST].normal_()
        self.n = PAST

    def __len__(self):
        return self.n

    def update(self, k, v):
        n = self.n
        self.k[:, :, n:n + 1] = k
        self.v[:, :, n:n + 1] = v
        self.n = n + 1
        return self.k[:, :, :n + 1], self.v[:, :, :n + 1]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.proj = nn.Linear(D, D, bias=False)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)

    def forward(self, x, cache):                            # x: (B, 1, D)
        q, k, v = self.qkv(self.ln1(x)).view(B, 1, 3, H, HD).permute(2, 0, 3, 1, 4)
        k_all, v_all = cache.update(k, v)                   # (B, H, T, HD)
        att = (q @ k_all.transpose(-2, -1)) * HD ** -0.5
        att = att.softmax(dim=-1)
        o = (att @ v_all).transpose(1, 2).reshape(B, 1, D)
        x = x + self.proj(o)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)

    def forward(self, tok, caches):
        x = self.emb(tok).unsqueeze(1)
        for blk, cache in zip(self.blocks, caches):
            x = blk(x, cache)
        return self.head(self.ln_f(x[:, 0]))


model = GPT().to(device=dev, dtype=dt).eval()
caches = [StaticCache() if args.prealloc else CatCache() for _ in range(LAYERS)]
tok = torch.randint(0, V, (B,), device=dev)
last = {}


@torch.no_grad()
def step():
    logits = model(tok, caches)
    tok.copy_(logits.argmax(dim=-1))                        # greedy: feeds the next step
    last["logits"] = logits


def check():
    for c in caches:
        if len(c) != PAST + args.warmup:
            raise AssertionError(f"cache holds {len(c)} positions, expected {PAST + args.warmup}")
    if not torch.isfinite(last["logits"].float()).all():
        raise AssertionError("non-finite logits")
    if not ((tok >= 0) & (tok < V)).all():
        raise AssertionError("token out of range")


run(step, name="torch_kv_decode", backend="torch", args=args,
    variant="prealloc" if args.prealloc else "baseline", check=check)
