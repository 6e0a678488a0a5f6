"""One beam-search decoding step of a small fp16 decoder-only LM with a KV cache, in eager
PyTorch.

A GPT-2-medium-width draft/summarisation model cut to 2 layers (d_model 1024, 16 heads of
64, GELU MLP 4096, learned positions up to 2048, vocabulary 50257, tied embeddings),
decoding 4 prompts with 8 beams each (32 rows) with ``max_length=2048``. The KV cache is
preallocated for 2048 positions per layer, [32, 16, 2048, 64] for keys and for values
(128 MB each, 512 MB in all); a step starts at position 384 (the prompt and earlier steps
already in the cache, filled at set up) and advances one position per call, wrapping back
to 384 before the cache is full.

Per step, as in Hugging Face's beam search: embed the 32 last tokens, run the layers
(LayerNorm, fused QKV ``addmm``, write the new key and value into the cache at the
position, attention over the filled prefix with explicit ``matmul``/softmax, output
projection, residual, LayerNorm, GELU MLP), the final LayerNorm and the tied LM head in
fp16, ``log_softmax`` in float32 over the vocabulary, add the running beam scores, a
``topk`` of 2 x beams over beams x vocabulary per prompt, the beam index and token from
the flat index, keep the best 8 candidates, and reorder every layer's cache along the
batch dimension with ``index_select`` (the whole preallocated tensor, as ``_reorder_cache``
does), plus the token history.

``--prefix-reorder`` reorders only the filled part of the caches (positions 0..t): an
``index_select`` of that slice copied back into the preallocated tensor, instead of an
``index_select`` of all 2048 positions into new tensors.
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
p.add_argument("--prefix-reorder", action="store_true",
               help="reorder only the filled prefix of the KV cache, in place")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
DTYPE = torch.float16 if dev == "cuda" else torch.float32
PROMPTS, BEAMS, VOCAB = 4, 8, 50257
D, HEADS, HD, FF, LAYERS = 1024, 16, 64, 4096, 2
MAX_LEN, START = 2048, 384
ROWS = PROMPTS * BEAMS


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, FF)
        self.out = nn.Linear(FF, D)

    def forward(self, x, cache_k, cache_v, t):
        b = x.shape[0]
        q, k, v = self.qkv(self.ln1(x)).view(b, 3, HEADS, HD).unbind(1)
        cache_k[:, :, t] = k
        cache_v[:, :, t] = v
        keys = cache_k[:, :, :t + 1]                                  # [b, heads, t+1, hd]
        vals = cache_v[:, :, :t + 1]
        att = torch.matmul(q.unsqueeze(2), keys.transpose(-1, -2)) / math.sqrt(HD)
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, vals).reshape(b, D)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(MAX_LEN, D)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D)

    def forward(self, tokens, pos, caches, t):
        x = self.wte(tokens) + self.wpe(pos)
        for blk, (ck, cv) in zip(self.blocks, caches):
            x = blk(x, ck, cv, t)
        return F.linear(self.ln_f(x), self.wte.weight)               # tied LM head


model = LM()
with torch.no_grad():
    for blk in model.blocks:
        for lin in (blk.proj, blk.out):
            lin.weight.mul_(0.5 / math.sqrt(LAYERS))
model = model.to(dev, DTYPE).eval()
caches = [(0.5 * torch.randn(ROWS, HEADS, MAX_LEN, HD, device=dev, dtype=DTYPE),
           torch.randn(ROWS, HEADS, MAX_LEN, HD, device=dev, dtype=DTYPE))
          for _ in range(LAYERS)]
history = torch.randint(0, VOCAB, (ROWS, MAX_LEN), device=dev)
beam_scores = torch.zeros(PROMPTS, BEAMS, device=dev)
beam_scores[:, 1:] = -1e9                      # only the first beam is live at the start
beam_scores = beam_scores.view(-1)
state = {"t": START}
out = {}


def step():
    global beam_scores, history
    t = state["t"]
    state["t"] = START if t + 1 >= MAX_LEN else t + 1
    with torch.inference_mode():
        tokens = history[:, t - 1]
        pos = torch.full((ROWS,), t, device=dev, dtype=torch.long)
        logits = model(tokens, pos, caches, t)                            # [rows, vocab]
        logp = F.log_softmax(logits.float(), dim=-1)
        cand = (logp + beam_scores[:, None]).view(PROMPTS, BEAMS * VOCAB)
        top_scores, top_idx = torch.topk(cand, 2 * BEAMS, dim=1, largest=True, sorted=True)
        beam_idx = torch.div(top_idx, VOCAB, rounding_mode="floor")
        token = top_idx % VOCAB
        # no EOS handling: keep the best BEAMS candidates of each prompt
        beam_scores = top_scores[:, :BEAMS].reshape(-1)
        src = (beam_idx[:, :BEAMS] + torch.arange(PROMPTS, device=dev)[:, None] * BEAMS)
        src = src.reshape(-1)
        new_tokens = token[:, :BEAMS].reshape(-1)
        if args.prefix_reorder:
            for ck, cv in caches:
                ck[:, :, :t + 1].copy_(ck[:, :, :t + 1].index_select(0, src))
                cv[:, :, :t + 1].copy_(cv[:, :, :t + 1].index_select(0, src))
        else:
            for i, (ck, cv) in enumerate(caches):
                caches[i] = (ck.index_select(0, src), cv.index_select(0, src))
        history = history.index_select(0, src)
        history[:, t] = new_tokens
    out.update(t=t, logits=logits, logp=logp, src=src, new_tokens=new_tokens,
               scores=beam_scores, tokens=tokens)


def check():
    # the last step's logits for two rows against a float32 recomputation from the caches;
    # the caches have been reordered since: new row j holds the history of old row src[j]
    t, src = out["t"], out["src"]
    with torch.inference_mode():
        for j in (0, 9):
            r = int(src[j])
            x = (model.wte.weight[out["tokens"][r]] + model.wpe.weight[t]).float()
            for li, blk in enumerate(model.blocks):
                sd = {n: w.float() for n, w in blk.state_dict().items()}
                h = F.layer_norm(x, (D,), sd["ln1.weight"], sd["ln1.bias"])
                qkv = (h @ sd["qkv.weight"].T + sd["qkv.bias"]).view(3, HEADS, HD)
                ck, cv = caches[li]
                keys = ck[j, :, :t + 1].float()                       # [heads, t+1, hd]
                vals = cv[j, :, :t + 1].float()
                if not torch.allclose(keys[:, t], qkv[1], atol=3e-2, rtol=3e-2):
                    raise AssertionError(f"layer {li}: key written at {t} differs")
                a = torch.softmax(keys @ qkv[0][:, :, None] / math.sqrt(HD), dim=1)
                y = (a * vals).sum(1).reshape(D)
                x = x + y @ sd["proj.weight"].T + sd["proj.bias"]
                h = F.layer_norm(x, (D,), sd["ln2.weight"], sd["ln2.bias"])
                h = F.gelu(h @ sd["fc.weight"].T + sd["fc.bias"], approximate="tanh")
                x = x + h @ sd["out.weight"].T + sd["out.bias"]
            h = F.layer_norm(x, (D,), model.ln_f.weight.float(), model.ln_f.bias.float())
            want = h @ model.wte.weight.float().T
            got = out["logits"][r].float()
            err = ((got - want).norm() / want.norm()).item()
            if not err < 2e-2:
                raise AssertionError(f"row {r}: logits differ from float32 by {err:.3g}")
    # beam bookkeeping: scores sorted per prompt, sources within their prompt's beams
    s = out["scores"].view(PROMPTS, BEAMS)
    if not (s[:, :-1] >= s[:, 1:]).all() or not torch.isfinite(s).all():
        raise AssertionError("beam scores not sorted or not finite")
    if not ((src // BEAMS) == torch.arange(PROMPTS, device=dev).repeat_interleave(BEAMS)).all():
        raise AssertionError("a beam was taken from another prompt")
    if not (history[:, t] == out["new_tokens"]).all():
        raise AssertionError("token history not updated")
    lp = out["logp"].exp().sum(-1)
    if not torch.allclose(lp, torch.ones_like(lp), atol=1e-3):
        raise AssertionError("log_softmax rows do not sum to one")


run(step, name="torch_beam_search", backend="torch", args=args,
    variant="prefix_reorder" if args.prefix_reorder else "baseline", check=check)
