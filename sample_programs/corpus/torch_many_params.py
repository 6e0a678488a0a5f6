"""One training step of a deep stack of small layers with a per-parameter Adam loop.

Ten bias-free ``nn.Linear(256, 256)`` layers with ReLU in an ``nn.ModuleList``, a batch of
8192 rows, MSE against a fixed target, backward, then ``torch.optim.Adam(foreach=False)``:
the optimizer walks the parameters one at a time and launches its handful of elementwise
kernels (lerp, mul, addcmul, sqrt, div, add, addcdiv) for each 64K-element weight.
``--foreach`` uses the multi-tensor implementation (``foreach=True``), which updates all the
weights in a few launches.

(The layer count is kept at ten so that one step stays within the corpus's launch budget;
with the per-parameter loop every extra layer adds about ten launches.)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--foreach", action="store_true", help="Adam(foreach=True)")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
LAYERS, W, BATCH = 10, 256, 8192


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(W, W, bias=False) for _ in range(LAYERS))

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return x


model = Deep().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=args.foreach)
x = torch.randn(BATCH, W, device=dev)
target = torch.rand(BATCH, W, device=dev)
last = {}


def step():
    opt.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    last["loss"] = loss.detach()


def check():
    if not torch.isfinite(last["loss"]):
        raise AssertionError(f"loss {float(last['loss'])}")
    for i, prm in enumerate(model.parameters()):
        if prm.grad is None or not torch.isfinite(prm.grad).all():
            raise AssertionError(f"bad gradient for layer {i}")
        st = opt.state[prm]
        if int(st["step"]) != args.warmup:
            raise AssertionError(f"layer {i}: optimizer at step {int(st['step'])}")


run(step, name="torch_many_params", backend="torch", args=args,
    variant="foreach" if args.foreach else "baseline", check=check)
