"""One training step of a small ResNet-style CNN in FP32 (PyTorch defaults: cuDNN may use TF32).

Images of 64 x 3 x 64 x 64 in the default channels-first (NCHW) layout, conv-BN-ReLU residual
blocks, SGD with momentum. ``--channels-last`` converts the model and the input to
``torch.channels_last`` (NHWC), the layout cuDNN's tensor-core convolutions use natively.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--channels-last", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                    nn.BatchNorm2d(cout)) if stride != 1 or cin != cout
                      else nn.Identity())

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.short(x))


model = nn.Sequential(
    nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
    BasicBlock(64, 64, 1), BasicBlock(64, 128, 2),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 100)).to(dev).train()
x = torch.randn(64, 3, 64, 64, device=dev)
y = torch.randint(0, 100, (64,), device=dev)
if args.channels_last:
    model = model.to(memory_format=torch.channels_last)
    x = x.to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def step():
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


run(step, name="torch_cnn_train", backend="torch", args=args,
    variant="channels_last" if args.channels_last else "baseline")
