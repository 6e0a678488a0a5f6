"""Forward and backward of a UNet-style diffusion block in FP32, eager: GroupNorm -> SiLU ->
3x3 conv, a timestep-embedding add, a second GroupNorm/SiLU/conv, a residual, then spatial
self-attention over the 32 x 32 feature map written as matmul -> softmax -> matmul.

PyTorch defaults (cuDNN convolutions may use TF32, matmuls do not). ``--compile`` wraps the
block in ``torch.compile``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--compile", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
N, C, HW, TEMB = 16, 256, 32, 512


class ResAttnBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2, self.na = (nn.GroupNorm(32, C) for _ in range(3))
        self.c1 = nn.Conv2d(C, C, 3, padding=1)
        self.c2 = nn.Conv2d(C, C, 3, padding=1)
        self.t = nn.Linear(TEMB, C)
        self.qkv = nn.Conv2d(C, 3 * C, 1)
        self.out = nn.Conv2d(C, C, 1)

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(F.silu(temb))[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        x = x + h
        q, k, v = self.qkv(self.na(x)).reshape(N, 3, C, HW * HW).unbind(1)
        att = torch.softmax(q.transpose(1, 2) @ k / C ** 0.5, dim=-1)   # (N, HW^2, HW^2)
        o = (v @ att.transpose(1, 2)).reshape(N, C, HW, HW)
        return x + self.out(o)


block = ResAttnBlock().to(dev).train()
fwd = torch.compile(block) if args.compile else block
x = torch.randn(N, C, HW, HW, device=dev, requires_grad=True)
temb = torch.randn(N, TEMB, device=dev)


def step():
    block.zero_grad(set_to_none=True)
    fwd(x, temb).square().mean().backward()


run(step, name="torch_diffusion_block", backend="torch", args=args,
    variant="compile" if args.compile else "baseline")
