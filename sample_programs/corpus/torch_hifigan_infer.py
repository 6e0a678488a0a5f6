"""Batch inference of a HiFi-GAN-style neural vocoder (mel spectrogram -> waveform) in fp16.

A text-to-speech server's last stage: 16 utterances of 512 mel frames (80 bands, hop 256 at
22.05 kHz, about 5.9 s each) are turned into 16 waveforms of 131072 samples. The generator
follows HiFi-GAN V3 (Kong et al. 2020) as the Hugging Face port writes it: ``conv_pre``
(Conv1d 80 -> 256, kernel 7), three upsampling stages (LeakyReLU 0.1, ConvTranspose1d with
rates 8, 8, 4 and kernels 16, 16, 8, channels 256 -> 128 -> 64 -> 32), each followed by
a type-2 residual block (two dilated Conv1d of kernel 3, dilations 1 and 3, each after a
LeakyReLU and added back; one block per stage instead of V3's three, to stay within the
launch budget, still divided by the number of blocks as the original does), then LeakyReLU,
``conv_post`` (32 -> 1, kernel 7) and tanh. Every convolution carries weight normalisation
(``nn.utils.parametrizations.weight_norm``), as in the training code. The weights are random
stand-ins (the trained magnitudes of weight norm's g and v), the whole model is ``.half()``
and in ``eval()`` under ``torch.inference_mode()``; the mels are smooth random fields.

``--remove-weight-norm`` folds the weight normalisation into plain weights once after
loading (``remove_parametrizations``), as HiFi-GAN's inference script does, instead of
recomputing every convolution's weight from g and v in each forward.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.utils import parametrize  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--remove-weight-norm", action="store_true",
               help="fold weight normalisation into the weights after loading")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
dtype = torch.float16 if dev == "cuda" else torch.float32   # CPU convolutions lack fp16
BATCH, FRAMES, N_MELS = 16, 512, 80
UP_RATES, UP_KERNELS, UP_CH0 = (8, 8, 4), (16, 16, 8), 256
RES_KERNELS, RES_DILATIONS = (3,), ((1, 3),)
LRELU = 0.1
weight_norm = nn.utils.parametrizations.weight_norm


def get_padding(k, d=1):
    return (k * d - d) // 2


class ResBlock2(nn.Module):
    def __init__(self, ch, k, dilations):
        super().__init__()
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv1d(ch, ch, k, 1, dilation=d, padding=get_padding(k, d)))
            for d in dilations)

    def forward(self, x):
        for c in self.convs:
            xt = F.leaky_relu(x, LRELU)
            xt = c(xt)
            x = xt + x
        return x


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_kernels = len(RES_KERNELS)
        self.conv_pre = weight_norm(nn.Conv1d(N_MELS, UP_CH0, 7, 1, padding=3))
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        ch = UP_CH0
        for u, k in zip(UP_RATES, UP_KERNELS):
            self.ups.append(weight_norm(nn.ConvTranspose1d(ch, ch // 2, k, u,
                                                           padding=(k - u) // 2)))
            ch //= 2
            for rk, rd in zip(RES_KERNELS, RES_DILATIONS):
                self.resblocks.append(ResBlock2(ch, rk, rd))
        self.conv_post = weight_norm(nn.Conv1d(ch, 1, 7, 1, padding=3))

    def forward(self, x):
        x = self.conv_pre(x)
        for i, up in enumerate(self.ups):
            x = F.leaky_relu(x, LRELU)
            x = up(x)
            xs = None
            for j in range(self.num_kernels):
                r = self.resblocks[i * self.num_kernels + j](x)
                xs = r if xs is None else xs + r
            x = xs / self.num_kernels
        x = F.leaky_relu(x)
        x = self.conv_post(x)
        return torch.tanh(x)

    def remove_weight_norm(self):
        for m in self.modules():
            if parametrize.is_parametrized(m, "weight"):
                parametrize.remove_parametrizations(m, "weight", leave_parametrized=True)


def init_weights(model, gen):
    """Stand-ins for trained weights: v ~ N(0, 0.01) as HiFi-GAN initialises, and g set to
    the norm that keeps activations of order one through the stack."""
    for m in model.modules():
        if parametrize.is_parametrized(m, "weight"):
            pw = m.parametrizations.weight
            v = pw.original1
            with torch.no_grad():
                v.copy_(torch.randn(v.shape, generator=gen) * 0.01)
                fan_in = v[0].numel() if isinstance(m, nn.Conv1d) else v.shape[0] * v.shape[2]
                fan_in //= (m.stride[0] if isinstance(m, nn.ConvTranspose1d) else 1)
                g = pw.original0
                g.copy_(torch.full(g.shape, (1.5 / fan_in) ** 0.5 * v[0].numel() ** 0.5)
                        * (1 + 0.1 * torch.randn(g.shape, generator=gen)))
                m.bias.copy_(0.01 * torch.randn(m.bias.shape, generator=gen))
    with torch.no_grad():                    # log-mel inputs are large; speech is quiet
        model.conv_pre.parametrizations.weight.original0.mul_(0.15)
        model.conv_post.parametrizations.weight.original0.mul_(0.05)


def smooth_mels(gen):
    """Log-mel-like inputs: smooth in time and frequency, values around -11..2."""
    z = torch.randn(BATCH, N_MELS, FRAMES, generator=gen)
    k = torch.exp(-0.5 * (torch.arange(-6, 7, dtype=torch.float32) / 2.5) ** 2)
    k = (k / k.sum()).view(1, 1, -1)
    z = F.conv1d(z.reshape(-1, 1, FRAMES), k, padding=6).reshape(BATCH, N_MELS, FRAMES)
    z = F.conv1d(z.transpose(1, 2).reshape(-1, 1, N_MELS), k, padding=6)
    z = z.reshape(BATCH, FRAMES, N_MELS).transpose(1, 2)
    tilt = torch.linspace(0.0, -4.0, N_MELS).view(1, -1, 1)
    return (-4.0 + tilt + 6.0 * z).contiguous()


model = Generator()
init_weights(model, torch.Generator().manual_seed(0))
ref_model = Generator().eval()                        # float32 twin on the CPU for check()
init_weights(ref_model, torch.Generator().manual_seed(0))
mels = smooth_mels(torch.Generator().manual_seed(1))
if args.remove_weight_norm:
    model.remove_weight_norm()
model = model.to(dev, dtype).eval()
x_in = mels.to(dev, dtype)
out = {}


@torch.inference_mode()
def step():
    out["wav"] = model(x_in)


def check():
    wav = out["wav"].float().cpu()
    want_len = FRAMES * 256
    if wav.shape != (BATCH, 1, want_len):
        raise AssertionError(f"output shape {tuple(wav.shape)}")
    if not torch.isfinite(wav).all():
        raise AssertionError("non-finite samples")
    # two utterances through the float32 copy (weight norm still applied) on the CPU
    with torch.no_grad():
        want = ref_model(mels[[0, 9]].float())
    got = wav[[0, 9]]
    err = ((got - want).norm() / want.norm()).item()
    if not err < (2e-2 if dtype == torch.float16 else 1e-4):
        raise AssertionError(f"waveforms differ from float32 by {err:.3g}")
    rms = want.pow(2).mean().sqrt().item()
    if not 0.01 < rms < 0.9:
        raise AssertionError(f"implausible output level {rms:.3g}")


run(step, name="torch_hifigan_infer", backend="torch", args=args,
    variant="remove_weight_norm" if args.remove_weight_norm else "baseline", check=check)
