"""One FP32 training step of a mixture density network (Bishop 1994) on a multi-valued
regression problem.

The data is an inverse problem with several answers per input: 4M samples of an
8-dimensional observation (a random linear image of a planar two-link arm's end point,
its elbow sign, the link lengths and some noise features) and the 2-D joint angles that
produced it; several joint configurations map to nearly the same observation, so the
conditional density is multi-modal. It lives on the device; a step takes a random
minibatch of 65536 rows (``randint`` and two gathers).

The network is a 3-layer MLP (8 -> 512 -> 512, tanh) with one linear head giving,
for each of 16 diagonal Gaussian components in 2-D, a mixing logit, a mean and a log
standard deviation (80 outputs). The negative log-likelihood is written out by hand:
``log_softmax`` of the logits, ``exp`` of the log-sigmas, standardised residuals, the
Gaussian log-densities summed over the two dimensions, ``logsumexp`` over components and the
batch mean; backward; ``torch.optim.Adam`` (lr 1e-3, foreach).

PyTorch's default precision (FP32 matmuls without TF32).
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
N_DATA, BATCH, D_IN, D_OUT, K, HIDDEN = 4_000_000, 65536, 8, 2, 16, 512


def make_data(n, gen):
    """Observations [n, 8] and joint angles [n, 2] of a two-link arm (float32)."""
    l1 = gen.uniform(0.8, 1.2, n)
    l2 = gen.uniform(0.5, 0.9, n)
    th1 = gen.uniform(-np.pi, np.pi, n)
    th2 = gen.uniform(-0.9 * np.pi, 0.9 * np.pi, n)
    ex = l1 * np.cos(th1) + l2 * np.cos(th1 + th2)
    ey = l1 * np.sin(th1) + l2 * np.sin(th1 + th2)
    feats = np.stack([ex, ey, l1, l2, ex * ex + ey * ey,
                      0.1 * gen.standard_normal(n), 0.1 * gen.standard_normal(n),
                      np.sign(th2) * 0.05 + 0.1 * gen.standard_normal(n)], axis=1)
    mix = gen.standard_normal((D_IN, D_IN)) / np.sqrt(D_IN) + np.eye(D_IN)
    x = (feats @ mix).astype(np.float32)
    y = np.stack([th1, th2], axis=1).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y)


class MDN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(D_IN, HIDDEN), nn.Tanh(),
                                  nn.Linear(HIDDEN, HIDDEN), nn.Tanh())
        self.head = nn.Linear(HIDDEN, K * (1 + 2 * D_OUT))

    def forward(self, x):
        return self.head(self.body(x))


def mdn_nll(raw, y):
    """Mean negative log-likelihood of y [B, 2] under the mixtures in raw [B, 80]."""
    b = raw.shape[0]
    logit_pi = raw[:, :K]
    mu = raw[:, K:K + K * D_OUT].reshape(b, K, D_OUT)
    log_sigma = raw[:, K + K * D_OUT:].reshape(b, K, D_OUT)
    log_pi = F.log_softmax(logit_pi, dim=-1)
    sigma = torch.exp(log_sigma)
    z = (y[:, None, :] - mu) / sigma
    log_n = (-0.5 * z.pow(2).sum(-1) - log_sigma.sum(-1)
             - D_OUT * 0.5 * math.log(2.0 * math.pi))
    return -torch.logsumexp(log_pi + log_n, dim=-1).mean()


x_host, y_host = make_data(N_DATA, np.random.default_rng(0))
x_mean, x_std = x_host.mean(0), x_host.std(0)
data_x = ((x_host - x_mean) / x_std).to(dev)
data_y = y_host.to(dev)
del x_host, y_host
model = MDN().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
out = {}


def step():
    idx = torch.randint(0, N_DATA, (BATCH,), device=dev)
    xb, yb = data_x[idx], data_y[idx]
    opt.zero_grad(set_to_none=True)
    raw = model(xb)
    loss = mdn_nll(raw, yb)
    loss.backward()
    opt.step()
    out.update(loss=loss.detach(), raw=raw.detach(), y=yb, x=xb)


def check():
    from scipy.special import logsumexp

    loss = float(out["loss"])
    if not np.isfinite(loss):
        raise AssertionError(f"loss {loss}")
    # the loss of the last step from its network outputs, in float64
    raw = out["raw"].double().cpu().numpy()
    y = out["y"].double().cpu().numpy()
    lp = raw[:, :K] - logsumexp(raw[:, :K], axis=1, keepdims=True)
    mu = raw[:, K:3 * K].reshape(-1, K, 2)
    ls = raw[:, 3 * K:].reshape(-1, K, 2)
    z = (y[:, None, :] - mu) / np.exp(ls)
    ln = -0.5 * (z * z).sum(-1) - ls.sum(-1) - np.log(2.0 * np.pi)
    want = -logsumexp(lp + ln, axis=1).mean()
    if not abs(loss - want) < 1e-4 * max(1.0, abs(want)):
        raise AssertionError(f"loss {loss} differs from float64 {want}")
    # the network (current parameters) against a float64 copy on 512 rows
    xb = out["x"][:512]
    with torch.no_grad():
        got = model(xb).double()
        ref = MDN().to(dev).double()
        ref.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
        want = ref(xb.double())
    err = ((got - want).norm() / want.norm()).item()
    if not err < 1e-4:
        raise AssertionError(f"MLP differs from float64 by {err:.3g}")
    for name, prm in model.named_parameters():
        if not torch.isfinite(prm).all():
            raise AssertionError(f"non-finite parameter {name}")


run(step, name="torch_mdn_train", backend="torch", args=args, check=check)
