"""Inference of a small 3-D U-Net-style segmentation block in fp16, volumes in NCDHW.

Four 64^3 volumes with four input channels (MRI modalities, say): two Conv3d-BatchNorm3d-ReLU
blocks at 32 channels, max-pool, two at 64, a stride-2 ConvTranspose3d back up, concatenation
with the skip connection, two more blocks and a 1x1x1 classifier to four classes. Weights
and activations are fp16 in the default contiguous (NCDHW) layout.
``--channels-last`` converts the model and the input to ``torch.channels_last_3d`` (NDHWC).
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--channels-last", action="store_true", help="torch.channels_last_3d")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, C_IN, S, CLASSES = 4, 4, 64, 4


def cbr(cin, cout):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout),
                         nn.ReLU(inplace=True))


class SegBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(cbr(C_IN, 32), cbr(32, 32))
        self.pool = nn.MaxPool3d(2)
        self.enc2 = nn.Sequential(cbr(32, 64), cbr(64, 64))
        self.up = nn.ConvTranspose3d(64, 32, 2, stride=2)
        self.dec = nn.Sequential(cbr(64, 32), cbr(32, 32))
        self.head = nn.Conv3d(32, CLASSES, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        d = self.dec(torch.cat([self.up(e2), e1], dim=1))
        return self.head(d)


model = SegBlock()
for m in model.modules():                       # running statistics as a trained model has
    if isinstance(m, nn.BatchNorm3d):
        m.running_mean.uniform_(-0.1, 0.1)
        m.running_var.uniform_(0.5, 1.5)
model = model.to(dev).eval()
x = torch.randn(B, C_IN, S, S, S, device=dev)
ref_model = copy.deepcopy(model)                # float32 copy for the check
model = model.half()
xh = x.half()
if args.channels_last:
    model = model.to(memory_format=torch.channels_last_3d)
    xh = xh.contiguous(memory_format=torch.channels_last_3d)
out = {}


@torch.inference_mode()
def step():
    out["logits"] = model(xh)


def check():
    with torch.inference_mode():
        ref = ref_model(x)
    got = out["logits"].float()
    err = float((got - ref).abs().max() / ref.abs().max().clamp(min=1e-6))
    if not err < 5e-2:
        raise AssertionError(f"fp16 logits differ from float32 by {err:.3g} (relative to max)")
    agree = float((got.argmax(1) == ref.argmax(1)).float().mean())
    if not agree > 0.95:
        raise AssertionError(f"only {agree:.3f} of voxels get the float32 class")


run(step, name="torch_conv3d_seg", backend="torch", args=args,
    variant="channels_last" if args.channels_last else "baseline", check=check)
