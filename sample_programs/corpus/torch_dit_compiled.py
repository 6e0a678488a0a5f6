"""One classifier-free-guided DDIM sampling step of a DiT (diffusion transformer) under
``torch.compile``, in FP32 with TF32 matmuls.

A class-conditional latent diffusion transformer in the shape of DiT-XL/2 (Peebles & Xie
2023) for 256 x 256 images: 4-channel 32 x 32 latents, patch size 2 (256 tokens), width
1152, 16 heads of 72, MLP 4608 with tanh GELU, adaLN-Zero conditioning on the sum of a
sinusoidal timestep embedding (256 frequencies -> MLP) and a class embedding (1000 classes
plus the null class), fixed 2-D sin-cos position embeddings, a final adaLN layer to
2 x 2 x 8 outputs (noise and variance channels, ``learn_sigma``). The model is cut to its
first 4 of 28 blocks to stay within the launch budget. The weights are random stand-ins (the
adaLN projections not zero, as they would be after training).

One step is what DiT's ``sample.py`` does per timestep, with DDIM (eta 0) instead of DDPM
ancestral sampling: 16 latents for 16 class labels are doubled into a batch of 32 with the
null label on the second half, the model runs once on the batch, the guided noise is
``uncond + 4.0 * (cond - uncond)`` (applied to the noise channels only, as
``forward_with_cfg`` does), and the latents take the DDIM update from alpha-bar_t to
alpha-bar_(t-1) of a 50-step schedule (linear betas 1e-4..0.02 over 1000 steps; the program
walks the first 12 timesteps and starts over, each timestep's inputs a separate device
tensor so that nothing recompiles). Model,
guidance and update are one function compiled with ``torch.compile`` (default mode, no CUDA
graphs); attention is ``F.scaled_dot_product_attention`` as in timm's ``Attention``. As in
``sample.py``, ``torch.backends.cuda.matmul.allow_tf32 = True`` and the same for cuDNN.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

args = parser(__doc__).parse_args()
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.manual_seed(0)
dev = DEV
N_SAMPLES, LATENT, IN_CH, PATCH = 16, 32, 4, 2
WIDTH, HEADS, DEPTH, MLP, N_CLASSES = 1152, 16, 4, 4608, 1000
CFG_SCALE, SAMPLING_STEPS = 4.0, 50
TOKENS = (LATENT // PATCH) ** 2
OUT_CH = 2 * IN_CH


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def sincos_pos_embed(dim, grid):
    """DiT's fixed 2-D sin-cos position embedding, [grid * grid, dim]."""
    def one_d(d, pos):
        omega = 1.0 / 10000 ** (np.arange(d // 2, dtype=np.float64) / (d / 2.0))
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)
    gh, gw = np.meshgrid(np.arange(grid, dtype=np.float32), np.arange(grid, dtype=np.float32))
    emb = np.concatenate([one_d(dim // 2, gw), one_d(dim // 2, gh)], axis=1)
    return torch.from_numpy(emb).float()


class TimestepEmbedder(nn.Module):
    def __init__(self, freq=256):
        super().__init__()
        self.freq = freq
        self.mlp = nn.Sequential(nn.Linear(freq, WIDTH), nn.SiLU(), nn.Linear(WIDTH, WIDTH))

    def forward(self, t):
        half = self.freq // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32,
                                                          device=t.device) / half)
        args_ = t[:, None].float() * freqs[None]
        return self.mlp(torch.cat([torch.cos(args_), torch.sin(args_)], dim=-1))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class DiTBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH, elementwise_affine=False, eps=1e-6)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(WIDTH, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, MLP), nn.GELU(approximate="tanh"),
                                 nn.Linear(MLP, WIDTH))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(WIDTH, 6 * WIDTH))

    def forward(self, x, c):
        sh_msa, sc_msa, g_msa, sh_mlp, sc_mlp, g_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + g_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), sh_msa, sc_msa))
        x = x + g_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), sh_mlp, sc_mlp))
        return x


class DiT(nn.Module):
    def __init__(self):
        super().__init__()
        self.x_embedder = nn.Conv2d(IN_CH, WIDTH, PATCH, PATCH)
        self.t_embedder = TimestepEmbedder()
        self.y_embedder = nn.Embedding(N_CLASSES + 1, WIDTH)
        self.register_buffer("pos_embed", sincos_pos_embed(WIDTH, LATENT // PATCH)[None])
        self.blocks = nn.ModuleList(DiTBlock() for _ in range(DEPTH))
        self.norm_final = nn.LayerNorm(WIDTH, elementwise_affine=False, eps=1e-6)
        self.adaLN_final = nn.Sequential(nn.SiLU(), nn.Linear(WIDTH, 2 * WIDTH))
        self.linear_final = nn.Linear(WIDTH, PATCH * PATCH * OUT_CH)

    def forward(self, x, t, y):
        x = self.x_embedder(x).flatten(2).transpose(1, 2) + self.pos_embed
        c = self.t_embedder(t) + self.y_embedder(y)
        for blk in self.blocks:
            x = blk(x, c)
        shift, scale = self.adaLN_final(c).chunk(2, dim=1)
        x = self.linear_final(modulate(self.norm_final(x), shift, scale))
        h = w = LATENT // PATCH
        x = x.reshape(x.shape[0], h, w, PATCH, PATCH, OUT_CH)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(x.shape[0], OUT_CH, h * PATCH, w * PATCH)


def init_weights(model, gen):
    for name, prm in model.named_parameters():
        with torch.no_grad():
            if prm.dim() >= 2:
                fan_in = prm[0].numel()
                prm.copy_(torch.randn(prm.shape, generator=gen) * (1.0 / fan_in) ** 0.5)
            else:
                prm.copy_(0.02 * torch.randn(prm.shape, generator=gen))
        if "adaLN" in name and prm.dim() >= 2:
            with torch.no_grad():
                prm.mul_(0.3)


def cfg_ddim_step(model, latents, t, y, a_t, a_prev):
    """Guided noise prediction on the doubled batch and the DDIM update of the first half."""
    x = torch.cat([latents, latents], dim=0)
    out = model(x, t, y)
    eps = out[:, :IN_CH]
    cond, uncond = eps.chunk(2, dim=0)
    e = uncond + CFG_SCALE * (cond - uncond)
    x0 = (latents - (1 - a_t).sqrt() * e) / a_t.sqrt()
    return a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * e


betas = torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64)
alpha_bar = torch.cumprod(1 - betas, 0)
timesteps = list(range(999, -1, -1000 // SAMPLING_STEPS))          # 999, 979, ..., 19
sched = []
for i, t in enumerate(timesteps):
    t_prev = timesteps[i + 1] if i + 1 < len(timesteps) else -1
    a_prev = alpha_bar[t_prev] if t_prev >= 0 else torch.tensor(1.0, dtype=torch.float64)
    # separate device tensors per timestep (no views into one table: no recompiles)
    sched.append((torch.full((2 * N_SAMPLES,), t, device=dev, dtype=torch.int64),
                  alpha_bar[t].float().to(dev), a_prev.float().to(dev)))

model = DiT()
init_weights(model, torch.Generator().manual_seed(0))
model = model.to(dev).eval()
labels = torch.tensor([207, 360, 387, 974, 88, 979, 417, 279, 33, 812, 1, 555, 291, 947, 130,
                       700], device=dev)
y = torch.cat([labels, torch.full_like(labels, N_CLASSES)])
latents = torch.randn(N_SAMPLES, IN_CH, LATENT, LATENT, device=dev,
                      generator=torch.Generator(device=dev).manual_seed(0))
compiled = torch.compile(cfg_ddim_step)
state = {"k": 0, "x": latents}
out = {}


@torch.inference_mode()
def step():
    k = state["k"] % 12                       # the first 12 timesteps, then start over
    t, a_t, a_prev = sched[k]
    x_in = latents if k == 0 else state["x"]
    x_out = compiled(model, x_in, t, y, a_t, a_prev)
    state.update(k=state["k"] + 1, x=x_out)
    out.update(x_in=x_in, x_out=x_out, k=k)


def check():
    k = out["k"]
    t, a_t, a_prev = sched[k]
    with torch.inference_mode():
        eager = cfg_ddim_step(model, out["x_in"], t, y, a_t, a_prev)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        exact = cfg_ddim_step(model, out["x_in"], t, y, a_t, a_prev)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    got = out["x_out"]
    if not torch.isfinite(got).all():
        raise AssertionError("non-finite latents")
    for name, want, tol in (("eager TF32", eager, 1e-2), ("FP32", exact, 2e-2)):
        err = ((got - want).norm() / want.norm()).item()
        if not err < tol:
            raise AssertionError(f"compiled step differs from {name} by {err:.3g}")


run(step, name="torch_dit_compiled", backend="torch", args=args, check=check)
