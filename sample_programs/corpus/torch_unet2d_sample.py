"""One classifier-free-guided DDIM sampling step of a small class-conditional 2-D U-Net, fp16.

A pixel-space diffusion model for 64 x 64 RGB images: a sinusoidal timestep embedding and a
class embedding (index 10 is the "no class" token) go through an MLP and are added into every
residual block; residual blocks are GroupNorm -> SiLU -> 3x3 conv, embedding add, GroupNorm ->
SiLU -> 3x3 conv, plus a 1x1 conv on the skip path when the width changes. One encoder block
at 64^2 (128 channels), a strided-conv downsampling, a middle block at 32^2 (256 channels),
nearest-neighbour upsampling + conv, concatenation with the skip and a decoder block at 64^2.
A step runs the conditional and unconditional halves as one batch of 2 x 16, mixes the two
noise predictions with guidance scale 4 and takes one deterministic DDIM update. Weights and
activations are fp16 (``model.half()``), and, as diffusion pipelines recommend for speed,
the model and the latent are converted to ``torch.channels_last`` (NHWC).
``--nchw`` leaves them in the default contiguous NCHW layout.
"""

import copy
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--nchw", action="store_true", help="keep the default NCHW layout")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, RES, CH, TEMB, CLASSES, GUIDANCE = 16, 64, 128, 512, 10, 4.0
T_STEPS = 1000


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device) / half)
    args_ = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args_), torch.sin(args_)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.emb = nn.Linear(TEMB, cout)
        self.norm2 = nn.GroupNorm(32, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.emb(F.silu(emb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class Upsample(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.time_mlp = nn.Sequential(nn.Linear(CH, TEMB), nn.SiLU(), nn.Linear(TEMB, TEMB))
        self.label_emb = nn.Embedding(CLASSES + 1, TEMB)
        self.conv_in = nn.Conv2d(3, CH, 3, padding=1)
        self.enc = ResBlock(CH, CH)                                      # 64^2
        self.down = nn.Conv2d(CH, CH, 3, stride=2, padding=1)
        self.mid = ResBlock(CH, 2 * CH)                                  # 32^2
        self.up = Upsample(2 * CH)
        self.dec = ResBlock(3 * CH, CH)                                  # 64^2, cat skip
        self.norm_out = nn.GroupNorm(32, CH)
        self.conv_out = nn.Conv2d(CH, 3, 3, padding=1)

    def forward(self, x, t, y):
        emb = self.time_mlp(timestep_embedding(t, CH).to(x.dtype)) + self.label_emb(y)
        skip = self.enc(self.conv_in(x), emb)
        h = self.mid(self.down(skip), emb)
        h = self.dec(torch.cat([self.up(h), skip], dim=1), emb)
        return self.conv_out(F.silu(self.norm_out(h)))


model = UNet().eval()
ref_model = copy.deepcopy(model).to(dev)           # float32 copy for the check
model = model.to(dev).half()
betas = torch.linspace(1e-4, 0.02, T_STEPS, dtype=torch.float64)
alphas_bar = torch.cumprod(1 - betas, dim=0)
T_NOW, T_PREV = 500, 480                          # one step of a 50-step DDIM schedule
ab_t, ab_prev = float(alphas_bar[T_NOW]), float(alphas_bar[T_PREV])

x_t = torch.randn(B, 3, RES, RES, device=dev)
labels = torch.randint(0, CLASSES, (B,), device=dev)
null = torch.full((B,), CLASSES, device=dev)
t_in = torch.full((2 * B,), T_NOW, device=dev)
x_h = x_t.half()
if not args.nchw:
    model = model.to(memory_format=torch.channels_last)
    x_h = x_h.contiguous(memory_format=torch.channels_last)
out = {}


def ddim_step(net, x):
    eps = net(torch.cat([x, x]), t_in, torch.cat([labels, null]))
    eps_c, eps_u = eps.chunk(2)
    eps = eps_u + GUIDANCE * (eps_c - eps_u)
    x0 = (x - math.sqrt(1 - ab_t) * eps) / math.sqrt(ab_t)
    return math.sqrt(ab_prev) * x0 + math.sqrt(1 - ab_prev) * eps


@torch.inference_mode()
def step():
    out["x_prev"] = ddim_step(model, x_h)


def check():
    with torch.inference_mode():
        ref = ddim_step(ref_model, x_t)
    got = out["x_prev"].float()
    err = float((got - ref).abs().max() / ref.abs().max())
    if not (torch.isfinite(got).all() and err < 3e-2):
        raise AssertionError(f"fp16 DDIM step differs from float32 by {err:.3g} (relative to max)")


run(step, name="torch_unet2d_sample", backend="torch", args=args,
    variant="nchw" if args.nchw else "baseline", check=check)
