"""Inference of two Swin-Transformer blocks (windowed self-attention) in fp16.

A batch of 32 feature maps of 56 x 56 tokens, width 128, 4 heads, windows of 7 x 7 (64 windows
per image): a regular block (W-MSA) then a shifted one (SW-MSA, a cyclic shift by 3 with
``torch.roll`` and the usual -100 attention mask between regions that are not neighbours in
the image). Pre-norm blocks: LayerNorm, window partition (view, permute, contiguous), one
qkv Linear, attention written out as ``q @ k^T``, relative position bias gathered from its
learned (13 x 13, heads) table every forward and added, the shift mask added, softmax,
``@ v``, output projection, window reverse, residual; then LayerNorm and a GELU MLP (4x).
Weights and activations are fp16 (``model.half()``). ``--sdpa`` computes the attention with
``F.scaled_dot_product_attention`` (memory-efficient backend), passing the bias (plus the shift
mask, expanded to every window) as ``attn_mask``, as timm does.
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, RES, DIM, HEADS, WS, SHIFT = 32, 56, 128, 4, 7, 3


def window_partition(x, ws):
    """(B, H, W, C) -> (B * num_windows, ws * ws, C)"""
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws * ws, c)


def window_reverse(windows, ws, h, w):
    """(B * num_windows, ws * ws, C) -> (B, H, W, C)"""
    b = windows.shape[0] // ((h // ws) * (w // ws))
    x = windows.view(b, h // ws, w // ws, ws, ws, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(b, h, w, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim, ws, heads, use_sdpa):
        super().__init__()
        self.heads, self.use_sdpa = heads, use_sdpa
        self.scale = (dim // heads) ** -0.5
        self.rel_bias_table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws),
                                            indexing="ij")).flatten(1)        # (2, ws*ws)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
        self.register_buffer("rel_index", (rel[..., 0] * (2 * ws - 1) + rel[..., 1]).flatten(),
                             persistent=False)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def rel_bias(self, n):
        bias = self.rel_bias_table[self.rel_index].view(n, n, -1)
        return bias.permute(2, 0, 1).contiguous()                           # (heads, N, N)

    def forward(self, x, mask=None):
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)                                             # (bw, heads, N, d)
        bias = self.rel_bias(n)
        if self.use_sdpa:
            attn_mask = bias.unsqueeze(0)
            if mask is not None:
                nw = mask.shape[0]
                mask = mask.view(1, nw, 1, n, n).expand(bw // nw, -1, self.heads, -1, -1)
                attn_mask = attn_mask + mask.reshape(-1, self.heads, n, n)
            # the memory-efficient kernel: cuDNN's, picked by default here, was no faster
            # than the unfused path on 49-token windows
            with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn + bias.unsqueeze(0)
            if mask is not None:
                nw = mask.shape[0]
                attn = attn.view(bw // nw, nw, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.heads, n, n)
            attn = attn.softmax(dim=-1)
            x = attn @ v
        return self.proj(x.transpose(1, 2).reshape(bw, n, c))


class SwinBlock(nn.Module):
    def __init__(self, dim, res, heads, ws, shift, use_sdpa):
        super().__init__()
        self.res, self.ws, self.shift = res, ws, shift
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, ws, heads, use_sdpa)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        mask = None
        if shift:
            region = torch.zeros(1, res, res, 1)
            cuts = (slice(0, -ws), slice(-ws, -shift), slice(-shift, None))
            label = 0
            for hs in cuts:
                for wsl in cuts:
                    region[:, hs, wsl, :] = label
                    label += 1
            win = window_partition(region, ws).squeeze(-1)                  # (nW, N)
            mask = win[:, None, :] - win[:, :, None]
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        self.register_buffer("attn_mask", mask, persistent=False)

    def forward(self, x):
        b, L, c = x.shape
        shortcut = x
        x = self.norm1(x).view(b, self.res, self.res, c)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = self.attn(window_partition(x, self.ws), mask=self.attn_mask)
        x = window_reverse(win, self.ws, self.res, self.res)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + x.view(b, L, c)
        return x + self.mlp(self.norm2(x))


model = nn.Sequential(SwinBlock(DIM, RES, HEADS, WS, 0, args.sdpa),
                      SwinBlock(DIM, RES, HEADS, WS, SHIFT, args.sdpa)).eval()
with torch.no_grad():                     # a trained table is not near zero
    for blk in model:
        blk.attn.rel_bias_table.normal_(0.0, 1.0)
ref_model = copy.deepcopy(model).to(dev)      # float32 copy for the check
for blk in ref_model:
    blk.attn.use_sdpa = False
model = model.to(dev).half()
x = torch.randn(B, RES * RES, DIM, device=dev)
xh = x.half()
out = {}


@torch.inference_mode()
def step():
    out["y"] = model(xh)


def check():
    with torch.inference_mode():
        ref = ref_model(x)
    got = out["y"].float()
    err = float((got - ref).abs().max() / ref.abs().max())
    if not (torch.isfinite(got).all() and err < 2e-2):
        raise AssertionError(f"fp16 output differs from float32 by {err:.3g} (relative to max)")


run(step, name="torch_window_attention", backend="torch", args=args,
    variant="sdpa" if args.sdpa else "baseline", check=check)
