"""One training step of a deep ensemble of five small MLP regressors, in FP32.

A tabular regression task: 1M rows of 64 float32 descriptors with a smooth non-linear target
plus noise, held on the device. The ensemble is five independently initialised MLPs
``64 -> 256 -> ReLU -> 256 -> ReLU -> 1`` trained together on the same minibatch of 8192
rows (``torch.randint`` and two gathers per step) with one ``torch.optim.Adam`` (lr 1e-3,
default foreach implementation) over all their parameters; the loss is the sum of the
members' mean squared errors, so each member gets its own gradient.

The baseline keeps the members as an ``nn.ModuleList`` of ``nn.Sequential`` models and loops
over them in Python, as the model-ensembling examples do. ``--batched`` stacks the members'
weights into ``EnsembleLinear`` layers ([members, in, out] weights and [members, out]
biases, initialised from the same five models) and runs all members at once with
``torch.baddbmm``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--batched", action="store_true",
               help="all members in one set of baddbmm layers instead of a Python loop")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
ROWS, FEATURES, HIDDEN, MEMBERS, BATCH = 1 << 20, 64, 256, 5, 8192


def member():
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN),
                         nn.ReLU(), nn.Linear(HIDDEN, 1))


class EnsembleLinear(nn.Module):
    """``members`` independent linear layers applied to [members, batch, in] at once."""

    def __init__(self, linears):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([lin.weight.detach().t() for lin in linears]))
        self.bias = nn.Parameter(torch.stack([lin.bias.detach() for lin in linears]))

    def forward(self, x):                                      # [E, B, in] -> [E, B, out]
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight)


class BatchedEnsemble(nn.Module):
    def __init__(self, members):
        super().__init__()
        self.layers = nn.ModuleList(
            EnsembleLinear([m[i] for m in members]) for i in (0, 2, 4))

    def forward(self, x):                                      # [B, in] -> [E, B, 1]
        h = x.unsqueeze(0).expand(MEMBERS, -1, -1)
        h = F.relu(self.layers[0](h))
        h = F.relu(self.layers[1](h))
        return self.layers[2](h)


# data: y = smooth function of a few projections of x, plus noise
gen = torch.Generator().manual_seed(1)
proj = torch.randn(FEATURES, 4, generator=gen) / FEATURES ** 0.5
x_all = torch.randn(ROWS, FEATURES, generator=gen)
z = x_all @ proj
y_all = (torch.sin(2 * z[:, 0]) + z[:, 1] * z[:, 2] + 0.5 * torch.tanh(z[:, 3])
         + 0.1 * torch.randn(ROWS, generator=gen)).unsqueeze(1)
x_all, y_all = x_all.to(dev), y_all.to(dev)
del z

members = [member() for _ in range(MEMBERS)]
if args.batched:
    model = BatchedEnsemble(members).to(dev)
else:
    model = nn.ModuleList(members).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
out = {}


def predict(x):
    """Predictions [E, rows, 1] of every member."""
    if args.batched:
        return model(x)
    return torch.stack([m(x) for m in model])


def step():
    idx = torch.randint(0, ROWS, (BATCH,), device=dev)
    x, y = x_all[idx], y_all[idx]
    opt.zero_grad(set_to_none=True)
    if args.batched:
        pred = model(x)
        loss = F.mse_loss(pred, y.expand_as(pred)) * MEMBERS
    else:
        loss = sum(F.mse_loss(m(x), y) for m in model)
    loss.backward()
    opt.step()
    out["loss"] = loss.detach()


def member_weights(e):
    """(W1, b1, W2, b2, W3, b3) of member e as float64 NumPy, W as [in, out]."""
    if args.batched:
        return [t.detach()[e].double().cpu().numpy() for lyr in model.layers
                for t in (lyr.weight, lyr.bias)]
    m = model[e]
    return [t.detach().double().cpu().numpy() for i in (0, 2, 4)
            for t in (m[i].weight.t(), m[i].bias)]


def check():
    loss = float(out["loss"])
    if not (np.isfinite(loss) and loss < MEMBERS * 2.0):
        raise AssertionError(f"ensemble loss {loss}")
    x = x_all[:256]
    with torch.no_grad():
        got = predict(x).double().cpu().numpy()
    xh = x.double().cpu().numpy()
    for e in range(MEMBERS):
        w1, b1, w2, b2, w3, b3 = member_weights(e)
        want = np.maximum(np.maximum(xh @ w1 + b1, 0) @ w2 + b2, 0) @ w3 + b3
        err = np.abs(got[e] - want).max() / np.abs(want).max()
        if not err < 1e-3:
            raise AssertionError(f"member {e}: prediction differs from float64 by {err:.3g}")
    if np.abs(got[0] - got[1]).max() < 1e-3:
        raise AssertionError("members 0 and 1 predict the same: not independent")


run(step, name="torch_deep_ensemble", backend="torch", args=args,
    variant="batched" if args.batched else "baseline", check=check)
