"""Streaming-ASR encoder inference: the macaron feed-forward half and the convolution module
of a Conformer-L layer under ``torch.compile`` (default mode), bf16.

The batch is 32 utterances of 20 s after 4x convolutional subsampling (500 frames of 40 ms,
width 512), held as [batch, frames, 512] bf16. The modules are written like torchaudio's
``conformer.py`` (``_FeedForwardModule`` and ``_ConvolutionModule``):

- feed-forward half-step: ``x + 0.5 * FFN(x)`` with FFN = LayerNorm, ``Linear(512, 2048)``,
  SiLU, dropout, ``Linear(2048, 512)``, dropout;
- convolution module: ``x + Conv(x)`` with Conv = LayerNorm, transpose to [batch, 512,
  frames], pointwise ``Conv1d(512, 1024, 1)``, GLU over channels, depthwise
  ``Conv1d(512, 512, 31, padding=15, groups=512)``, ``BatchNorm1d`` (eval, running
  statistics as after training), SiLU, pointwise ``Conv1d(512, 512, 1)``, dropout, transpose
  back.

The control: the model is put in ``eval()``, cast to bf16 and wrapped in
``torch.compile(dynamic=False)``; Inductor fuses the LayerNorms, the GLU, the BatchNorm +
SiLU and the residual arithmetic into a few Triton kernels around the cuBLAS / cuDNN GEMMs and
the depthwise convolution, the shapes are fixed and the step is one graph. About 90 GFLOP a
step; estimated 0.3-0.6 ms.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from common import DEV, parser, run  # noqa: E402

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
BATCH, FRAMES, D, FFN, KERNEL = 32, 500, 512, 2048, 31


class FeedForwardModule(nn.Module):
    def __init__(self, input_dim, hidden_dim, dropout=0.1):
        super().__init__()
        self.sequential = nn.Sequential(
            nn.LayerNorm(input_dim), nn.Linear(input_dim, hidden_dim, bias=True), nn.SiLU(),
            nn.Dropout(dropout), nn.Linear(hidden_dim, input_dim, bias=True), nn.Dropout(dropout))

    def forward(self, x):
        return self.sequential(x)


class ConvolutionModule(nn.Module):
    def __init__(self, input_dim, num_channels, depthwise_kernel_size, dropout=0.1, bias=True):
        super().__init__()
        self.layer_norm = nn.LayerNorm(input_dim)
        self.sequential = nn.Sequential(
            nn.Conv1d(input_dim, 2 * num_channels, 1, stride=1, padding=0, bias=bias),
            nn.GLU(dim=1),
            nn.Conv1d(num_channels, num_channels, depthwise_kernel_size, stride=1,
                      padding=(depthwise_kernel_size - 1) // 2, groups=num_channels, bias=bias),
            nn.BatchNorm1d(num_channels),
            nn.SiLU(),
            nn.Conv1d(num_channels, input_dim, kernel_size=1, stride=1, padding=0, bias=bias),
            nn.Dropout(dropout))

    def forward(self, x):
        x = self.layer_norm(x)
        x = x.transpose(1, 2)
        x = self.sequential(x)
        return x.transpose(1, 2)


class ConformerFFConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.ffn1 = FeedForwardModule(D, FFN)
        self.conv_module = ConvolutionModule(D, D, KERNEL)

    def forward(self, x):
        x = x + 0.5 * self.ffn1(x)
        return x + self.conv_module(x)


model = ConformerFFConv()
g = torch.Generator().manual_seed(1)
with torch.no_grad():                        # norms and BatchNorm statistics as after training
    for m in model.modules():
        if isinstance(m, (nn.LayerNorm, nn.BatchNorm1d)):
            m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=g))
            m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=g))
        if isinstance(m, nn.BatchNorm1d):
            m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
            m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
dtype = torch.bfloat16
model = model.to(dev, dtype).eval()
compiled = torch.compile(model, dynamic=False)
# encoder activations: per-frame features with slow temporal structure, scale ~1
t = torch.linspace(0, 60, FRAMES)
base = torch.sin(t[None, :, None] * torch.rand(1, 1, D, generator=g) * 3
                 + torch.rand(BATCH, 1, D, generator=g) * 6.28)
x = (base + 0.5 * torch.randn(BATCH, FRAMES, D, generator=g)).to(dev, dtype)
out = {}


@torch.inference_mode()
def step():
    out["y"] = compiled(x)


def check():
    y = out["y"]
    if tuple(y.shape) != (BATCH, FRAMES, D) or y.dtype != dtype or not torch.isfinite(y).all():
        raise AssertionError(f"output {tuple(y.shape)} {y.dtype}")
    ref = ConformerFFConv().to(dev).eval()
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    with torch.inference_mode():
        want = ref(x[:4].float())
    err = (y[:4].float() - want).abs()
    scale = want.abs().mean().item()
    if not (err.mean().item() < 0.03 * scale and err.max().item() < 0.3 * scale + 0.1):
        raise AssertionError(f"differs from eager float32: mean {err.mean().item():.3g}, "
                             f"max {err.max().item():.3g} (scale {scale:.3g})")


run(step, name="torch_conformer_compiled", backend="torch", args=args, check=check)
