"""One training step of a sequence classifier with an LSTM written by hand (a research-style
cell: two Linear layers and the gate math in Python, unrolled over the time steps).

FP32, batch 128, 4 time steps, hidden 1024, Adam (foreach). ``--cudnn`` replaces the hand loop
with ``nn.LSTM`` (cuDNN's fused RNN), the same maths.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--cudnn", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, T, IN, HID, CLASSES = 128, 4, 512, 1024, 10


class HandLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(IN, 4 * HID)
        self.hh = nn.Linear(HID, 4 * HID)

    def forward(self, x):
        h = x.new_zeros(B, HID)
        c = x.new_zeros(B, HID)
        for t in range(T):
            gates = self.ih(x[:, t]) + self.hh(h)
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h


class CudnnLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(IN, HID, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0][:, -1]


encoder = CudnnLSTM() if args.cudnn else HandLSTM()
model = nn.ModuleDict({"enc": encoder, "out": nn.Linear(HID, CLASSES)}).to(dev).train()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(B, T, IN, device=dev)
y = torch.randint(0, CLASSES, (B,), device=dev)


def step():
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model["out"](model["enc"](x)), y)
    loss.backward()
    opt.step()


run(step, name="torch_lstm_train", backend="torch", args=args,
    variant="cudnn" if args.cudnn else "baseline")
