"""One training step of a small all-convolutional CTC speech recogniser, in FP32.

A batch of 32 utterances of 80-band log-mel features, padded to 800 frames (10 ms frames;
the true lengths are 480 to 800 frames), with character transcripts over a 32-symbol
alphabet (CTC blank = 0 plus 31 labels), 60 to 100 labels each, padded into a [32, 100]
int64 tensor on the GPU.

Model (QuartzNet-style, channels-first [batch, channels, time]):

- front end: ``Conv1d(80, 256, 11, stride=2, padding=5)`` without bias, ``BatchNorm1d``,
  ReLU (800 -> 400 frames);
- three time-channel separable residual blocks: depthwise ``Conv1d`` (groups = 256, kernel
  33, 39 and 51, "same" padding) -> pointwise 1 x 1 ``Conv1d`` -> ``BatchNorm1d`` -> add the
  block input -> ReLU;
- a ``Linear(256, 32)`` classifier over the transposed features [batch, time, 256], then
  ``log_softmax`` and a transpose to [time, batch, symbols].

Loss: ``F.ctc_loss`` with the per-utterance output lengths (ceil(frames / 2)), the padded
targets and their lengths, blank 0, mean reduction (each utterance's loss divided by its
target length, then averaged), ``zero_infinity=True``. Backward, then
``torch.optim.SGD`` (lr 0.02, momentum 0.9, weight decay 1e-3, default implementation).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
B, FRAMES, N_MELS, SYMBOLS, CH = 32, 800, 80, 32, 256
MAX_LABELS = 100
BLOCK_KERNELS = (33, 39, 51)


class SeparableBlock(nn.Module):
    def __init__(self, channels, kernel):
        super().__init__()
        self.depthwise = nn.Conv1d(channels, channels, kernel, padding=kernel // 2,
                                   groups=channels, bias=False)
        self.pointwise = nn.Conv1d(channels, channels, 1, bias=False)
        self.bn = nn.BatchNorm1d(channels)

    def forward(self, x):
        return F.relu(self.bn(self.pointwise(self.depthwise(x))) + x)


class ConvCTC(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(
            nn.Conv1d(N_MELS, CH, 11, stride=2, padding=5, bias=False),
            nn.BatchNorm1d(CH), nn.ReLU())
        self.blocks = nn.Sequential(*[SeparableBlock(CH, k) for k in BLOCK_KERNELS])
        self.classifier = nn.Linear(CH, SYMBOLS)

    def forward(self, feats):                       # [B, mels, frames]
        h = self.blocks(self.front(feats))          # [B, CH, frames / 2]
        logits = self.classifier(h.transpose(1, 2))  # [B, T, symbols]
        return logits.log_softmax(dim=-1).transpose(0, 1)   # [T, B, symbols]


def output_length(frames):
    return (frames + 2 * 5 - 11) // 2 + 1


model = ConvCTC().to(dev).train()
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-3)

gen = np.random.default_rng(0)
frames = np.sort(gen.integers(480, FRAMES + 1, B))[::-1].copy()     # longest first
label_lens = frames // 8
feats = torch.randn(B, N_MELS, FRAMES)
for i, n in enumerate(frames):
    feats[i, :, n:] = 0.0                                             # padding
feats = feats.to(dev)
targets = torch.zeros(B, MAX_LABELS, dtype=torch.long)
for i, n in enumerate(label_lens):
    targets[i, :n] = torch.from_numpy(gen.integers(1, SYMBOLS, n))
targets = targets.to(dev)
input_lengths = torch.from_numpy(output_length(frames)).to(dev)
target_lengths = torch.from_numpy(label_lens).to(dev)
out = {}


def step():
    opt.zero_grad(set_to_none=True)
    log_probs = model(feats)
    loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
                      reduction="mean", zero_infinity=True)
    loss.backward()
    opt.step()
    out["loss"], out["log_probs"] = loss.detach(), log_probs.detach()


def ctc_nll(lp, labels):
    """-log p(labels | lp) by the CTC forward recursion in log space; lp [T, symbols]."""
    ext = np.zeros(2 * len(labels) + 1, dtype=np.int64)
    ext[1::2] = labels
    skip = np.zeros(len(ext), dtype=bool)
    skip[2:] = (ext[2:] != 0) & (ext[2:] != ext[:-2])
    alpha = np.full(len(ext), -np.inf)
    alpha[:2] = lp[0, ext[:2]]
    for t in range(1, lp.shape[0]):
        prev1 = np.concatenate(([-np.inf], alpha[:-1]))
        prev2 = np.where(skip, np.concatenate(([-np.inf, -np.inf], alpha[:-2])), -np.inf)
        alpha = np.logaddexp(np.logaddexp(alpha, prev1), prev2) + lp[t, ext]
    return -np.logaddexp(alpha[-1], alpha[-2])


def check():
    lp = out["log_probs"].double().cpu().numpy()                     # [T, B, symbols]
    if lp.shape != (output_length(FRAMES), B, SYMBOLS):
        raise AssertionError(f"log_probs shape {lp.shape}")
    tg = targets.cpu().numpy()
    in_len = output_length(frames)
    per_utt = [ctc_nll(lp[:in_len[i], i], tg[i, :label_lens[i]]) / label_lens[i]
               for i in range(B)]
    ref = float(np.mean(per_utt))
    got = float(out["loss"])
    if not (np.isfinite(ref) and abs(got - ref) <= 1e-3 * abs(ref)):
        raise AssertionError(f"CTC loss {got} vs NumPy forward recursion {ref}")
    for name, prm in model.named_parameters():
        if not torch.isfinite(prm).all():
            raise AssertionError(f"non-finite parameter {name}")


run(step, name="torch_ctc_asr", backend="torch", args=args, check=check)
