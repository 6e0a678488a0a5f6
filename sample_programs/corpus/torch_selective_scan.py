"""Forward pass (prefill) of one Mamba-style block with the selective scan in plain PyTorch.

Batch 8, sequence length 1024, d_model 768, d_inner 1536 (expand 2), 16 states per channel,
dt rank 48, depthwise causal convolution of width 4; weights and activations in bfloat16,
the scan in float32 (``A_log``, ``D`` and the dt bias initialised as in Mamba: A = -[1..16]
for every channel, dt between 1e-3 and 1e-1). The block: ``nn.RMSNorm``, the input
projection to x and the gate z (Linear 768 -> 3072), the depthwise causal ``nn.Conv1d`` on x
in [batch, channels, length] layout followed by SiLU, ``x_proj`` (1536 -> 48 + 16 + 16) to the
low-rank dt, B and C, ``dt_proj`` (48 -> 1536, with bias) and softplus, the selective scan,
the skip term D * x, the SiLU(z) gate, the output projection (1536 -> 768) and the residual.

The scan works in chunks of 32 steps. The log-decays dt * A and the inputs dt * x * B are
formed for the whole sequence as [batch, 32 chunks, 32, d_inner, state] float32 tensors;
within each chunk the states follow from cumulative sums of the log-decays
(``torch.cumsum``), ``torch.exp`` and a cumulative sum of the decay-weighted inputs, all
chunks at once; the state carried from one chunk to the next is a Python loop over the 32
chunks (decay times state plus the chunk's own final state); the carried-in states are then
added back with their decays, and the output is the contraction of the states with C
(``torch.einsum``). The final state is returned as the inference cache would keep it.
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

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
B, L, D_MODEL, D_INNER, N_STATE, DT_RANK, D_CONV, CHUNK = 8, 1024, 768, 1536, 16, 48, 4, 32


def selective_scan(u, dt, A, Bm, Cm, D):
    """u, dt: [b, l, d]; A: [d, n]; Bm, Cm: [b, l, n]; D: [d] -> y [b, l, d], last state."""
    b, length, d = u.shape
    n = A.shape[1]
    c, q = length // CHUNK, CHUNK
    dA = (dt[..., None] * A).reshape(b, c, q, d, n)                        # log-decays
    dBu = ((dt * u)[..., None] * Bm[:, :, None, :]).reshape(b, c, q, d, n)
    S = dA.cumsum(dim=2)                       # sum of log-decays from the chunk start to t
    R = S[:, :, -1:] - S                       # ... from after t to the chunk end (<= 0)
    w = torch.exp(R)
    h = (dBu * w).cumsum(dim=2) / w            # states within each chunk, zero start
    decay_in = torch.exp(S)

    chunk_decay = decay_in[:, :, -1]           # [b, c, d, n]
    chunk_final = h[:, :, -1]
    state = torch.zeros(b, d, n, device=u.device, dtype=u.dtype)
    starts = []
    for k in range(c):
        starts.append(state)
        state = chunk_decay[:, k] * state + chunk_final[:, k]
    h = h + decay_in * torch.stack(starts, dim=1)[:, :, None]
    y = torch.einsum("bcqdn,bcqn->bcqd", h, Cm.reshape(b, c, q, n))
    return y.reshape(b, length, d) + u * D, state


class MambaBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(D_MODEL, eps=1e-5)
        self.in_proj = nn.Linear(D_MODEL, 2 * D_INNER, bias=False)
        self.conv1d = nn.Conv1d(D_INNER, D_INNER, D_CONV, groups=D_INNER, padding=D_CONV - 1)
        self.x_proj = nn.Linear(D_INNER, DT_RANK + 2 * N_STATE, bias=False)
        self.dt_proj = nn.Linear(DT_RANK, D_INNER, bias=True)
        self.out_proj = nn.Linear(D_INNER, D_MODEL, bias=False)
        a = torch.arange(1, N_STATE + 1, dtype=torch.float32).repeat(D_INNER, 1)
        self.A_log = nn.Parameter(torch.log(a))
        self.D = nn.Parameter(torch.ones(D_INNER))
        dt = torch.exp(torch.rand(D_INNER) * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3))
        with torch.no_grad():
            nn.init.uniform_(self.dt_proj.weight, -DT_RANK ** -0.5, DT_RANK ** -0.5)
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))   # softplus^-1(dt)

    def forward(self, hidden, out=None):
        residual = hidden
        xz = self.in_proj(self.norm(hidden))
        x, z = xz.chunk(2, dim=-1)                                        # [B, L, D_INNER]
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :L]).transpose(1, 2)
        dt, Bm, Cm = self.x_proj(x).split([DT_RANK, N_STATE, N_STATE], dim=-1)
        dt = F.softplus(self.dt_proj(dt).float())
        A = -torch.exp(self.A_log.float())
        u = x.float()
        y, last_state = selective_scan(u, dt, A, Bm.float(), Cm.float(), self.D.float())
        if out is not None:
            out["scan"] = (u, dt, A, Bm, Cm, y, last_state)
        y = y.to(hidden.dtype) * F.silu(z)
        return residual + self.out_proj(y), last_state


model = MambaBlock().to(dev, torch.bfloat16).eval()
hidden = torch.randn(B, L, D_MODEL, device=dev).to(torch.bfloat16)
out = {}


def step():
    with torch.no_grad():
        out["y"], out["state"] = model(hidden, out)


def reference_scan(u, dt, A, Bm, Cm, D, batch, chans):
    """Sequential float64 recurrence for one sequence and a few channels."""
    u, dt = u[batch][:, chans], dt[batch][:, chans]                     # [l, c]
    Bm, Cm, A, D = Bm[batch], Cm[batch], A[chans], D[chans]              # [l, n], [c, n]
    h = np.zeros(A.shape)
    ys = []
    for t in range(u.shape[0]):
        h = np.exp(dt[t][:, None] * A) * h + (dt[t] * u[t])[:, None] * Bm[t][None, :]
        ys.append(h @ Cm[t] + D * u[t])
    return np.stack(ys), h


def check():
    u, dt, A, Bm, Cm, y, last_state = out["scan"]
    if not torch.isfinite(out["y"]).all():
        raise AssertionError("non-finite block output")
    chans = np.arange(0, D_INNER, 97)
    npy = [t.detach().double().cpu().numpy() for t in (u, dt, A, Bm, Cm)]
    dvec = model.D.detach().double().cpu().numpy()
    for batch in (0, B - 1):
        ref_y, ref_h = reference_scan(*npy, dvec, batch, chans)
        got_y = y[batch].double().cpu().numpy()[:, chans]
        err = np.abs(got_y - ref_y).max() / np.abs(ref_y).max()
        if not err < 1e-3:
            raise AssertionError(f"scan output, batch {batch}: relative error {err:.3g}")
        got_h = last_state[batch].double().cpu().numpy()[chans]
        err = np.abs(got_h - ref_h).max() / np.abs(ref_h).max()
        if not err < 1e-3:
            raise AssertionError(f"final state, batch {batch}: relative error {err:.3g}")


run(step, name="torch_selective_scan", backend="torch", args=args, check=check)
