"""Autoregressive decoding with a KV cache: one new token for every sequence of the batch,
through a small 4-layer GPT-style model in bf16 (weights in bf16, no autocast).

``--batch N`` (1 or 64) sets how many sequences decode together; the cache holds 256 earlier
positions. ``--graphs`` captures the token step once in a CUDA graph and replays it, instead
of launching every kernel from Python each token.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--batch", type=int, default=1)
p.add_argument("--graphs", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev, dt = DEV, torch.bfloat16
B, D, H, LAYERS, V, PAST = args.batch, 1024, 16, 4, 32000, 256
HD = D // H


def w(*shape):
    return (torch.randn(*shape, device=dev) * 0.02).to(dt)


layers = [dict(ln1=torch.ones(D, device=dev, dtype=dt), qkv=w(3 * D, D), proj=w(D, D),
               ln2=torch.ones(D, device=dev, dtype=dt), fc1=w(4 * D, D), fc2=w(D, 4 * D),
               k=w(B, H, PAST + 1, HD), v=w(B, H, PAST + 1, HD)) for _ in range(LAYERS)]
emb = w(V, D)
tok = torch.randint(0, V, (B,), device=dev)
out = torch.empty(B, dtype=torch.long, device=dev)


def token_step():
    x = emb[tok]                                            # (B, D)
    for L in layers:
        h = F.layer_norm(x, (D,), L["ln1"])
        q, k, v = F.linear(h, L["qkv"]).view(B, 3, H, HD).unbind(1)
        L["k"][:, :, PAST] = k                              # append to the cache
        L["v"][:, :, PAST] = v
        att = torch.softmax((q.unsqueeze(2) @ L["k"].transpose(-2, -1)) / HD ** 0.5, dim=-1)
        o = (att @ L["v"]).reshape(B, D)
        x = x + F.linear(o, L["proj"])
        x = x + F.linear(F.gelu(F.linear(F.layer_norm(x, (D,), L["ln2"]), L["fc1"])), L["fc2"])
    logits = F.linear(x, emb)
    out.copy_(torch.argmax(logits, dim=-1))


if args.graphs:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            token_step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        token_step()
    step = graph.replay
else:
    step = token_step

run(step, name=f"torch_decode_b{B}", backend="torch", args=args,
    variant="cuda_graphs" if args.graphs else "baseline")
