"""Eager bf16 inference of a T5-style encoder stage with relative position bias.

A T5-base-sized encoder (d_model 768, 12 heads of 64, d_ff 3072, ReLU feed-forward, no
biases, pre-norm RMS "T5LayerNorm" without mean subtraction), its first layer plus the
final norm (a one-layer stage, to stay within the launch budget), written the way the
Hugging Face T5 code is: the first layer computes the bucketed relative position bias (32
buckets, max distance 128, bidirectional) from an ``nn.Embedding`` of [buckets, heads],
adds the padding mask to it once ([batch, heads, L, L]) for every layer to reuse; scores
are ``q @ k^T`` without 1/sqrt(d) scaling, plus the bias, a softmax in float32 cast back to
bf16, and ``@ v``. The layer norm upcasts to float32, takes the mean of squares, ``rsqrt``
and casts back before the weight.

The batch is 32 passages of up to 512 tokens (lengths 160-512, right padded), as in a
retrieval encoder that embeds a document collection; the output is the mean-pooled
(mask-weighted) last hidden state.

``--sdpa`` replaces the explicit attention (two batched GEMMs, a [32, 12, 512, 512] fp32
softmax and its casts) by ``F.scaled_dot_product_attention`` with the bias as a float mask
and ``scale=1.0``.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--sdpa", action="store_true", help="fused scaled_dot_product_attention")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
DTYPE = torch.bfloat16
BATCH, SEQ, VOCAB = 32, 512, 32128
D_MODEL, HEADS, D_KV, D_FF, LAYERS = 768, 12, 64, 3072, 1
BUCKETS, MAX_DIST = 32, 128


class T5LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, h):
        variance = h.to(torch.float32).pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        return self.weight * h.to(self.weight.dtype)


def relative_position_bucket(rel, num_buckets=BUCKETS, max_distance=MAX_DIST):
    """T5's bidirectional bucketing of key_pos - query_pos."""
    num_buckets //= 2
    buckets = (rel > 0).to(torch.long) * num_buckets
    rel = torch.abs(rel)
    max_exact = num_buckets // 2
    is_small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, rel, large)


class T5Attention(nn.Module):
    def __init__(self, has_bias):
        super().__init__()
        inner = HEADS * D_KV
        self.q = nn.Linear(D_MODEL, inner, bias=False)
        self.k = nn.Linear(D_MODEL, inner, bias=False)
        self.v = nn.Linear(D_MODEL, inner, bias=False)
        self.o = nn.Linear(inner, D_MODEL, bias=False)
        self.has_bias = has_bias
        if has_bias:
            self.relative_attention_bias = nn.Embedding(BUCKETS, HEADS)

    def compute_bias(self, q_len, k_len):
        ctx = torch.arange(q_len, dtype=torch.long, device=dev)[:, None]
        mem = torch.arange(k_len, dtype=torch.long, device=dev)[None, :]
        buckets = relative_position_bucket(mem - ctx)
        values = self.relative_attention_bias(buckets)               # [q, k, heads]
        return values.permute([2, 0, 1]).unsqueeze(0)                 # [1, heads, q, k]

    def forward(self, h, mask, position_bias=None):
        b, L, _ = h.shape

        def shape(x):
            return x.view(b, -1, HEADS, D_KV).transpose(1, 2)

        q, k, v = shape(self.q(h)), shape(self.k(h)), shape(self.v(h))
        if position_bias is None:
            position_bias = self.compute_bias(L, L) + mask            # [b, heads, L, L]
        if args.sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=position_bias, scale=1.0)
        else:
            scores = torch.matmul(q, k.transpose(3, 2))
            scores += position_bias
            attn = F.softmax(scores.float(), dim=-1).type_as(scores)
            ctx = torch.matmul(attn, v)
        ctx = ctx.transpose(1, 2).contiguous().view(b, -1, HEADS * D_KV)
        return self.o(ctx), position_bias


class T5Block(nn.Module):
    def __init__(self, has_bias):
        super().__init__()
        self.ln_attn = T5LayerNorm(D_MODEL)
        self.attn = T5Attention(has_bias)
        self.ln_ff = T5LayerNorm(D_MODEL)
        self.wi = nn.Linear(D_MODEL, D_FF, bias=False)
        self.wo = nn.Linear(D_FF, D_MODEL, bias=False)

    def forward(self, h, mask, position_bias):
        a, position_bias = self.attn(self.ln_attn(h), mask, position_bias)
        h = h + a
        h = h + self.wo(F.relu(self.wi(self.ln_ff(h))))
        return h, position_bias


class T5EncoderStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.blocks = nn.ModuleList([T5Block(i == 0) for i in range(LAYERS)])
        self.final_norm = T5LayerNorm(D_MODEL)

    def forward(self, ids, attention_mask):
        h = self.embed(ids)
        ext = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        bias = None
        for blk in self.blocks:
            h, bias = blk(h, ext, bias)
        return self.final_norm(h)


model = T5EncoderStage()
with torch.no_grad():
    for prm in model.parameters():
        if prm.dim() == 2:
            prm.normal_(0.0, 0.5 / math.sqrt(prm.shape[1]))
    model.embed.weight.normal_(0.0, 1.0)
    model.blocks[0].attn.relative_attention_bias.weight.normal_(0.0, 1.0)
model = model.to(dev, DTYPE).eval()
lengths = torch.randint(160, SEQ + 1, (BATCH,))
ids = torch.randint(1, VOCAB, (BATCH, SEQ))
attention_mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
ids = (ids * attention_mask).to(dev)
attention_mask = attention_mask.to(dev)
out = {}


def step():
    with torch.inference_mode():
        hidden = model(ids, attention_mask)
        m = attention_mask[..., None].to(hidden.dtype)
        pooled = (hidden * m).sum(1) / m.sum(1)
    out.update(hidden=hidden, pooled=pooled)


def reference(rows):
    """The same encoder in float32 (manual attention, explicit bucket loop) for a few rows."""
    blocks = model.blocks
    pos = torch.arange(SEQ)
    rel = (pos[None, :] - pos[:, None]).tolist()
    table = blocks[0].attn.relative_attention_bias.weight.float().cpu()
    nb, me = BUCKETS // 2, BUCKETS // 4
    bucket = torch.empty(SEQ, SEQ, dtype=torch.long)
    for i in range(SEQ):
        for j in range(SEQ):
            r = rel[i][j]
            base = nb if r > 0 else 0
            r = abs(r)
            if r < me:
                bucket[i, j] = base + r
            else:
                big = me + int(math.log(r / me) / math.log(MAX_DIST / me) * (nb - me))
                bucket[i, j] = base + min(big, nb - 1)
    bias = table[bucket].permute(2, 0, 1).to(dev)                      # [heads, L, L]
    res = []
    f32 = {n: t.float() for n, t in model.state_dict().items()}

    def norm(x, w):
        return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    for r in rows:
        n = int(lengths[r])
        h = f32["embed.weight"][ids[r, :n]]
        for i in range(LAYERS):
            pre = f"blocks.{i}."
            x = norm(h, f32[pre + "ln_attn.weight"])
            q, k, v = (
                (x @ f32[pre + f"attn.{c}.weight"].T).view(n, HEADS, D_KV).transpose(0, 1)
                for c in "qkv")
            a = torch.softmax(q @ k.transpose(1, 2) + bias[:, :n, :n], dim=-1) @ v
            h = h + a.transpose(0, 1).reshape(n, -1) @ f32[pre + "attn.o.weight"].T
            x = norm(h, f32[pre + "ln_ff.weight"])
            h = h + torch.relu(x @ f32[pre + "wi.weight"].T) @ f32[pre + "wo.weight"].T
        res.append(norm(h, f32["final_norm.weight"]))
    return res


def check():
    if not torch.isfinite(out["pooled"]).all():
        raise AssertionError("non-finite pooled output")
    rows = [int(torch.argmin(lengths)), int(torch.argmax(lengths)), 7]
    for r, want in zip(rows, reference(rows)):
        n = int(lengths[r])
        got = out["hidden"][r, :n].float()
        err = ((got - want).norm() / want.norm()).item()
        if not err < 3e-2:
            raise AssertionError(f"row {r} (length {n}) differs from float32 by {err:.3g}")
        pooled = want.mean(0)
        perr = ((out["pooled"][r].float() - pooled).norm() / pooled.norm()).item()
        if not perr < 3e-2:
            raise AssertionError(f"pooled row {r} differs by {perr:.3g}")


run(step, name="torch_t5_encoder", backend="torch", args=args,
    variant="sdpa" if args.sdpa else "baseline", check=check)
