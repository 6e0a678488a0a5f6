"""One bf16-autocast training step of a SASRec-style sequential recommender with a full
softmax over the item catalogue.

Next-item prediction on users' interaction histories: 52000 items (ids 1..52000, 0 is the
padding id, so the item table has 52001 rows), 200000 users whose histories (20 to 300
interactions, item popularity Zipf-like with some session structure) live on the device as a
[users, 65] int64 window of their most recent items, left padded with 0. A step samples 128
users (``randint`` and a gather), takes positions 0..63 as inputs and 1..64 as targets
(8192 positions, the padded ones ignored).

The model: the item embedding (128 wide, scaled by sqrt(128)) plus a learned positional
embedding, the padding positions zeroed, one pre-LayerNorm causal self-attention block
(SASRec uses two; one keeps the step within the launch budget: 2 heads of 64, bias-free
fused QKV and output projections, ``F.scaled_dot_product_attention(is_causal=True)``, a
bias-free GELU feed-forward of width 512), a final LayerNorm and the tied output layer: logits
``h @ item_emb.weight.T`` over all 52001 items, ``F.cross_entropy(ignore_index=0)``. Training
under ``torch.autocast(dtype=torch.bfloat16)`` with float32 parameters, ``AdamW(fused=True)``.

``--pad-items`` gives the item table 52032 rows (a multiple of 64) and adds a fixed output
bias of -inf on the 31 extra rows, so that the logits' row length and the GEMMs' leading
dimensions are multiples of 64 while the softmax and the loss stay those of the 52001 items.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--pad-items", action="store_true",
               help="item table padded to a multiple of 64 rows, extra logits masked")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
N_ITEMS, N_USERS, SEQ, BATCH, D, HEADS, FFN, LAYERS = 52000, 200_000, 64, 128, 128, 2, 512, 1
ROWS = N_ITEMS + 1
ROWS_PADDED = (ROWS + 63) // 64 * 64 if args.pad_items else ROWS


def make_histories(gen):
    """[users, SEQ + 1] int64: each user's most recent items, left padded with 0."""
    lengths = np.minimum(20 + gen.geometric(1 / 60.0, N_USERS), 300)
    pop = 1.0 / np.arange(1, N_ITEMS + 1) ** 0.9
    pop /= pop.sum()
    perm = gen.permutation(N_ITEMS) + 1                  # popularity rank -> item id
    hist = np.zeros((N_USERS, SEQ + 1), np.int64)
    keep = np.minimum(lengths, SEQ + 1)
    total = int(keep.sum())
    draws = perm[gen.choice(N_ITEMS, total, p=pop)]
    # sessions: with probability 0.5 the next item is a "neighbour" of the previous one
    nxt = gen.random(total) < 0.5
    draws[1:][nxt[1:]] = (draws[:-1][nxt[1:]] + gen.integers(1, 20, int(nxt[1:].sum()))
                          - 1) % N_ITEMS + 1
    pos = 0
    for u in range(N_USERS):
        n = keep[u]
        hist[u, SEQ + 1 - n:] = draws[pos:pos + n]
        pos += n
    return torch.from_numpy(hist)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False)
        self.fc1, self.fc2 = nn.Linear(D, FFN, bias=False), nn.Linear(FFN, D, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, D // HEADS).unbind(2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, D))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class SASRec(nn.Module):
    def __init__(self, rows):
        super().__init__()
        self.item_emb = nn.Embedding(rows, D, padding_idx=0)
        self.pos_emb = nn.Embedding(SEQ, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        if rows > ROWS:
            bias = torch.zeros(rows)
            bias[ROWS:] = float("-inf")
            self.register_buffer("out_bias", bias)
        else:
            self.out_bias = None

    def forward(self, seq):
        keep = (seq != 0).unsqueeze(-1)
        x = self.item_emb(seq) * D ** 0.5 + self.pos_emb.weight
        x = x * keep
        for blk in self.blocks:
            x = blk(x)
        h = self.ln(x)
        return F.linear(h, self.item_emb.weight, self.out_bias)


hist = make_histories(np.random.default_rng(0)).to(dev)
model = SASRec(ROWS_PADDED)
with torch.no_grad():                            # the same initial values in both variants
    g = torch.Generator().manual_seed(1)
    model.item_emb.weight.zero_()
    model.item_emb.weight[1:ROWS] = torch.randn(N_ITEMS, D, generator=g) * 0.02
    model.pos_emb.weight.copy_(torch.randn(SEQ, D, generator=g) * 0.2)
model = model.to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                        fused=dev == "cuda")
amp_dtype = torch.bfloat16
out = {}


def step():
    users = torch.randint(0, N_USERS, (BATCH,), device=dev)
    batch = hist[users]
    seq, tgt = batch[:, :-1], batch[:, 1:]
    with torch.autocast(device_type=dev, dtype=amp_dtype):
        logits = model(seq)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                               ignore_index=0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    out.update(loss=loss.detach(), seq=seq, tgt=tgt)


def check():
    loss = float(out["loss"])
    if not np.isfinite(loss) or not 3.0 < loss < 12.0:
        raise AssertionError(f"loss {loss}")
    # the loss of the current parameters on the last batch: autocast against float32
    seq, tgt = out["seq"], out["tgt"]
    with torch.no_grad():
        with torch.autocast(device_type=dev, dtype=amp_dtype):
            lg = model(seq)
            got = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt.reshape(-1), ignore_index=0)
        lg32 = model(seq).float()[..., :ROWS]    # float32, the 52001 real items only
        want = F.cross_entropy(lg32.reshape(-1, ROWS), tgt.reshape(-1), ignore_index=0)
    if not abs(float(got) - float(want)) < 0.02 * abs(float(want)):
        raise AssertionError(f"bf16 loss {float(got)} vs float32 {float(want)}")
    if args.pad_items:
        if not torch.isneginf(lg[..., ROWS:]).all():
            raise AssertionError("padding logits are not -inf")
        if model.item_emb.weight.grad is not None and \
                model.item_emb.weight.grad[ROWS:].abs().max() != 0:
            raise AssertionError("padding rows received gradient")
    for name, prm in model.named_parameters():
        if not torch.isfinite(prm).all():
            raise AssertionError(f"non-finite parameter {name}")


run(step, name="torch_seqrec_train", backend="torch", args=args,
    variant="pad_items" if args.pad_items else "baseline", check=check)
