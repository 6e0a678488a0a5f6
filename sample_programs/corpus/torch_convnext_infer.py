"""Batch inference of the first two stages of a ConvNeXt-T image backbone in fp16, timm style.

A feature-extraction job: 64 images of 224 x 224 (synthetic, ImageNet-normalised) through
the ConvNeXt-T stem (4 x 4 stride-4 convolution to 96 channels and a channels-first
LayerNorm), stage 1 (three blocks at 56 x 56, width 96), the downsampling layer (LayerNorm
and a 2 x 2 stride-2 convolution to 192 channels) and stage 2 (three blocks at 28 x 28, width
192), returning the stage-2 feature map, in ``eval()`` under ``torch.inference_mode()`` with
the model and the input in fp16 (``model.half()``).

The blocks are written like timm's ``ConvNeXtBlock`` with ``conv_mlp=False``: a 7 x 7
depthwise convolution in NCHW, ``permute(0, 2, 3, 1)`` to channels-last, ``LayerNorm``, a
``Linear`` MLP of ratio 4 with GELU, the layer-scale ``gamma`` multiply, ``permute(0, 3, 1,
2)`` back and the residual add; ``LayerNorm2d`` is timm's permute / ``F.layer_norm`` /
permute. Random weights (trunc-normal 0.02, layer scale as after training, about 0.1-0.5).

PyTorch's default contiguous NCHW tensors, not planted with anything. Only the stem
convolution sees a contiguous NCHW tensor: its LayerNorm2d normalises a copy of the permuted
view and hands on ``permute(0, 3, 1, 2)`` of the contiguous NHWC result, which is a
channels-last tensor, and the blocks' residual adds take their output strides from the
permuted operand, so every later convolution gets a channels-last input with a
contiguous-format weight (cuDNN then picks NHWC and may convert the weight) and the later
permutes are free views. Expected 1-2 ms, the MLP GEMMs (about
0.18 TFLOP) and the memory-bound depthwise convolutions, GELU and LayerNorms on
40-160 MB activations.
"""

import copy
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
BATCH, RES, DIMS, DEPTHS = 64, 224, (96, 192), (3, 3)


class LayerNorm2d(nn.LayerNorm):
    """timm's LayerNorm for channels of 2D spatial NCHW tensors."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim, ls_init_value=1e-6):
        super().__init__()
        self.conv_dw = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)
        self.gamma = nn.Parameter(ls_init_value * torch.ones(dim))
        self.drop_path = nn.Identity()

    def forward(self, x):
        shortcut = x
        x = self.conv_dw(x)
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        x = self.mlp(x)
        x = x.mul(self.gamma)
        x = x.permute(0, 3, 1, 2)
        return self.drop_path(x) + shortcut


class ConvNeXtStage(nn.Module):
    def __init__(self, in_chs, out_chs, depth, downsample):
        super().__init__()
        if downsample:
            self.downsample = nn.Sequential(LayerNorm2d(in_chs, eps=1e-6),
                                            nn.Conv2d(in_chs, out_chs, kernel_size=2, stride=2))
        else:
            self.downsample = nn.Identity()
        self.blocks = nn.Sequential(*[ConvNeXtBlock(out_chs) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(self.downsample(x))


class ConvNeXtFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, DIMS[0], kernel_size=4, stride=4),
                                  LayerNorm2d(DIMS[0], eps=1e-6))
        self.stages = nn.Sequential(
            ConvNeXtStage(DIMS[0], DIMS[0], DEPTHS[0], downsample=False),
            ConvNeXtStage(DIMS[0], DIMS[1], DEPTHS[1], downsample=True))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():                       # trained-looking norms and layer scales
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=g))
                    m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=g))
                elif isinstance(m, ConvNeXtBlock):
                    m.gamma.copy_(0.1 + 0.4 * torch.rand(m.gamma.shape, generator=g))

    def forward(self, x):
        return self.stages(self.stem(x))


def make_images(gen):
    """[BATCH, 3, RES, RES] ImageNet-normalised images: smooth colour fields, edges, noise."""
    low = torch.rand(BATCH, 3, 7, 7, generator=gen)
    img = F.interpolate(low, size=(RES, RES), mode="bilinear", align_corners=False)
    img = (img + 0.08 * torch.randn(BATCH, 3, RES, RES, generator=gen)).clamp(0, 1)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return (img - mean) / std


model32 = ConvNeXtFeatures().eval()
images32 = make_images(torch.Generator().manual_seed(0))
dtype = torch.float16 if dev == "cuda" else torch.bfloat16     # CPU dry runs use bf16
model = copy.deepcopy(model32).to(dev, dtype)
images = images32.to(dev, dtype)
out = {}


@torch.inference_mode()
def step():
    out["feats"] = model(images)


def check():
    f = out["feats"]
    if tuple(f.shape) != (BATCH, DIMS[1], RES // 8, RES // 8):
        raise AssertionError(f"output shape {tuple(f.shape)}")
    with torch.inference_mode():                   # float32 reference on two images
        want = model32.to(dev)(images32[:2].to(dev))
    model32.cpu()
    got = f[:2].float()
    err = (got - want).abs()
    scale = want.abs().mean().item()
    if not (err.mean().item() < 0.02 * scale + 1e-3 and err.max().item() < 0.5 * scale + 0.05):
        raise AssertionError(f"differs from float32: mean {err.mean().item():.3g}, "
                             f"max {err.max().item():.3g}, scale {scale:.3g}")
    if not torch.isfinite(f).all():
        raise AssertionError("non-finite features")


run(step, name="torch_convnext_infer", backend="torch", args=args, check=check)
