"""Inference of a small Vision Transformer (ViT-S/16-like: 4 blocks of width 384, 6 heads) on a
batch of 64 images of 224 x 224, in FP32 with PyTorch's default matmul precision (TF32 off).

``--tf32`` sets ``torch.backends.cuda.matmul.allow_tf32 = True`` (and the same for cuDNN).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--tf32", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = args.tf32
torch.backends.cudnn.allow_tf32 = args.tf32
dev = DEV
D, HEADS, DEPTH, PATCH, IMG, B = 384, 6, 4, 16, 224, 64


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, D, PATCH, PATCH)
        self.cls = nn.Parameter(torch.zeros(1, 1, D))
        self.pos = nn.Parameter(torch.randn(1, (IMG // PATCH) ** 2 + 1, D) * 0.02)
        layer = nn.TransformerEncoderLayer(D, HEADS, 4 * D, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, DEPTH, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, 1000)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(img.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.encoder(x))[:, 0])


model = ViT().to(dev).eval()
img = torch.randn(B, 3, IMG, IMG, device=dev)


@torch.inference_mode()
def step():
    model(img)


run(step, name="torch_vit_infer", backend="torch", args=args,
    variant="tf32" if args.tf32 else "baseline")
