"""Batch feature extraction with the front end of a wav2vec 2.0 (base) speech encoder, in FP32.

An offline job that turns 16 kHz speech into contextual-encoder inputs: a batch of 4
utterances of 10 s (160000 samples each; synthetic voiced syllables with varying pitch and
formants, fricative noise bursts and pauses, normalised to zero mean and unit variance per
utterance as the wav2vec 2.0 feature extractor does) through the model's convolutional
feature encoder, feature projection and convolutional positional embedding, up to the
LayerNorm that feeds the first Transformer layer, written like the Hugging Face module
(``feat_extract_norm="group"``, ``conv_bias=False``), in ``eval()`` under
``torch.inference_mode()``. Random weights with the model's initialisation.

- feature encoder: ``Conv1d(1, 512, 10, stride=5)``, ``GroupNorm(512, 512)`` (one group per
  channel, statistics over the 31999 frames), GELU; then four ``Conv1d(512, 512, 3,
  stride=2)`` and two ``Conv1d(512, 512, 2, stride=2)``, each followed by GELU (31999 ->
  15999 -> 7999 -> 3999 -> 1999 -> 999 -> 499 frames, 20 ms each); activations
  [4, 512, 31999] float32 (262 MB) after the first layer;
- feature projection: transpose to [batch, frames, 512], ``LayerNorm(512)``,
  ``Linear(512, 768)``;
- positional embedding: transpose back, ``Conv1d(768, 768, 128, padding=64, groups=16)``
  with bias (the weight normalisation of the checkpoint already folded in), drop the last
  frame, GELU, transpose, add to the projected features, ``LayerNorm(768)``.

PyTorch's default precision settings: the cuDNN convolutions may use TF32, the Linear runs
as an FP32 GEMM.
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

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
BATCH, SECONDS, RATE = 4, 10, 16000
CONV_DIM, CONV_KERNEL, CONV_STRIDE = 512, (10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2)
HIDDEN, POS_KERNEL, POS_GROUPS = 768, 128, 16


class FeatureEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_layers = nn.ModuleList()
        c_in = 1
        for k, s in zip(CONV_KERNEL, CONV_STRIDE):
            self.conv_layers.append(nn.Conv1d(c_in, CONV_DIM, k, stride=s, bias=False))
            c_in = CONV_DIM
        self.layer_norm = nn.GroupNorm(CONV_DIM, CONV_DIM, affine=True)

    def forward(self, x):
        h = x[:, None]
        for i, conv in enumerate(self.conv_layers):
            h = conv(h)
            if i == 0:
                h = self.layer_norm(h)
            h = F.gelu(h)
        return h


class FeatureProjection(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer_norm = nn.LayerNorm(CONV_DIM, eps=1e-5)
        self.projection = nn.Linear(CONV_DIM, HIDDEN)
        self.dropout = nn.Dropout(0.1)

    def forward(self, h):
        return self.dropout(self.projection(self.layer_norm(h)))


class PositionalConvEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(HIDDEN, HIDDEN, POS_KERNEL, padding=POS_KERNEL // 2,
                              groups=POS_GROUPS)

    def forward(self, h):
        h = h.transpose(1, 2)
        h = self.conv(h)
        h = h[:, :, :-1]                      # "same" padding for an even kernel
        h = F.gelu(h)
        return h.transpose(1, 2)


class Wav2Vec2FrontEnd(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_extractor = FeatureEncoder()
        self.feature_projection = FeatureProjection()
        self.pos_conv_embed = PositionalConvEmbedding()
        self.layer_norm = nn.LayerNorm(HIDDEN, eps=1e-5)
        self.dropout = nn.Dropout(0.1)
        for m in self.modules():                  # the model's initialisation
            if isinstance(m, PositionalConvEmbedding):
                nn.init.normal_(m.conv.weight, 0.0,
                                2 * math.sqrt(1 / (POS_KERNEL * m.conv.in_channels)))
                nn.init.constant_(m.conv.bias, 0.0)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Conv1d) and m.groups == 1:
                nn.init.kaiming_normal_(m.weight)
        with torch.no_grad():                     # norms as after training, not identity
            for m in self.modules():
                if isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
                    m.weight.copy_(1.0 + 0.1 * torch.randn_like(m.weight))
                    m.bias.copy_(0.05 * torch.randn_like(m.bias))

    def forward(self, wav):
        feats = self.feature_extractor(wav)       # [batch, 512, frames]
        feats = feats.transpose(1, 2)
        hidden = self.feature_projection(feats)   # [batch, frames, 768]
        hidden = hidden + self.pos_conv_embed(hidden)
        return self.dropout(self.layer_norm(hidden))


def make_speech(gen):
    """[BATCH, SECONDS * RATE] float32 speech-like signals, normalised per utterance."""
    n = SECONDS * RATE
    t = torch.arange(n, dtype=torch.float64) / RATE
    out = []
    for _ in range(BATCH):
        sig = torch.zeros(n, dtype=torch.float64)
        pos = 0
        while pos < n:
            dur = int(RATE * (0.12 + 0.25 * torch.rand(1, generator=gen).item()))
            seg = slice(pos, min(n, pos + dur))
            tt = t[seg] - t[pos]
            env = torch.sin(math.pi * tt / (dur / RATE)) ** 2
            kind = torch.rand(1, generator=gen).item()
            if kind < 0.65:                       # voiced: harmonics under two formants
                f0 = 100 + 150 * torch.rand(1, generator=gen).item()
                glide = 1 + 0.2 * (torch.rand(1, generator=gen).item() - 0.5) * tt
                f1 = 300 + 600 * torch.rand(1, generator=gen).item()
                f2 = 900 + 1500 * torch.rand(1, generator=gen).item()
                v = torch.zeros_like(tt)
                for h in range(1, 30):
                    fh = h * f0
                    if fh > 7000:
                        break
                    a = math.exp(-((fh - f1) / 200) ** 2) + 0.6 * math.exp(-((fh - f2) / 300) ** 2)
                    v += (a + 0.02) * torch.sin(2 * math.pi * fh * tt * glide)
                sig[seg] = env * v
            elif kind < 0.85:                     # fricative: noise burst
                sig[seg] = 0.3 * env * torch.randn(tt.numel(), generator=gen, dtype=torch.float64)
            pos += dur                            # else a pause
        sig += 0.003 * torch.randn(n, generator=gen, dtype=torch.float64)
        out.append(((sig - sig.mean()) / (sig.std() + 1e-7)).float())
    return torch.stack(out)


model = Wav2Vec2FrontEnd().to(dev).eval()
wav = make_speech(torch.Generator().manual_seed(0)).to(dev)
out = {}


@torch.inference_mode()
def step():
    out["h"] = model(wav)


def check():
    h = out["h"]
    frames = SECONDS * RATE
    for k, s in zip(CONV_KERNEL, CONV_STRIDE):
        frames = (frames - k) // s + 1
    if tuple(h.shape) != (BATCH, frames, HIDDEN) or frames != 499:
        raise AssertionError(f"output shape {tuple(h.shape)}")
    ref = copy.deepcopy(model).double()
    with torch.inference_mode():
        want = ref(wav[:2].double())
    err = (h[:2].double() - want).abs()
    rms = err.pow(2).mean().sqrt().item()
    if not (err.max().item() < 0.1 and rms < 1e-2):          # TF32 convolutions
        raise AssertionError(f"differs from float64: max {err.max().item():.3g}, rms {rms:.3g}")
    # the features should carry signal: frames differ from each other and from the mean
    spread = (want - want.mean(1, keepdim=True)).std().item()
    if not 0.2 < spread < 5.0:
        raise AssertionError(f"implausible feature spread {spread:.3g}")


run(step, name="torch_wav2vec_features", backend="torch", args=args, check=check)
