"""One training step of a NeRF-style radiance field MLP (coarse network, no view dependence),
in FP32.

The training set is 64 views of 200 x 200 pixels of a synthetic object (a soft-edged sphere
of radius 1 with a position-dependent colour, on a white background), rendered once at set
up by dense quadrature. As in NeRF codebases all rays are precomputed on the device, packed
as [rays, 9] (origin, direction, target colour) and shuffled once; a step takes the next
2048 rays (a slice, no copy).

Per step:

- stratified sampling of 64 depths per ray between near 2 and far 6 (bin edges from the
  mid-points, ``torch.rand`` jitter), 131072 sample points;
- positional encoding of the points with 10 frequencies, written vectorised: one broadcast
  multiply by the frequency bands, ``sin``, ``cos`` and a concatenation with the input
  (63 features);
- a NeRF trunk two layers shorter than the paper's: 6 ``Linear`` layers of width 256 with
  ReLU and the encoded input concatenated again after the third, and a ``Linear(256, 4)``
  output (RGB, density);
- volume rendering: sigmoid colour, distances between samples times the ray length,
  sigma * delta from ``relu`` of the density, transmittance as the exponential of an
  exclusive cumulative sum, weights, colour and accumulated opacity, white background;
- ``F.mse_loss`` against the target colours, backward, ``torch.optim.Adam`` (lr 5e-4,
  default foreach implementation).

PyTorch's default precision settings: FP32 matmuls without TF32. ``--tf32`` sets
``torch.set_float32_matmul_precision("high")`` so the linear layers run on TF32 tensor cores.
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
p.add_argument("--tf32", action="store_true", help="TF32 tensor cores for FP32 matmuls")
args = p.parse_args()
if args.tf32:
    torch.set_float32_matmul_precision("high")
torch.manual_seed(0)
dev = DEV
N_VIEWS, H, W = 64, 200, 200
N_RAYS, N_SAMPLES, NEAR, FAR = 2048, 64, 2.0, 6.0
L_XYZ, WIDTH, DEPTH, SKIP = 10, 256, 6, 3


def posenc(x, bands):
    """[..., 3] -> [..., 3 + 6 L]: x, sin(2^k x), cos(2^k x) for the L bands."""
    xb = (x[..., None, :] * bands[:, None]).flatten(-2)
    return torch.cat([x, torch.sin(xb), torch.cos(xb)], dim=-1)


class NeRF(nn.Module):
    def __init__(self):
        super().__init__()
        c_in = 3 + 6 * L_XYZ
        layers = [nn.Linear(c_in, WIDTH)]
        for i in range(1, DEPTH):
            layers.append(nn.Linear(WIDTH + (c_in if i == SKIP else 0), WIDTH))
        self.trunk = nn.ModuleList(layers)
        self.out = nn.Linear(WIDTH, 4)

    def forward(self, x_enc):
        h = x_enc
        for i, layer in enumerate(self.trunk):
            if i == SKIP:
                h = torch.cat([x_enc, h], dim=-1)
            h = F.relu(layer(h))
        return self.out(h)                                       # [points, 4]


def render(raw, z, rays_d):
    """Colour [R, 3], opacity [R], weights [R, S] from raw network outputs [R, S, 4]."""
    rgb = torch.sigmoid(raw[..., :3])
    delta = z[:, 1:] - z[:, :-1]
    delta = torch.cat([delta, torch.full_like(delta[:, :1], 1e10)], dim=-1)
    sigma_delta = F.relu(raw[..., 3]) * delta * rays_d.norm(dim=-1, keepdim=True)
    alpha = 1.0 - torch.exp(-sigma_delta)
    optical = torch.cumsum(sigma_delta[:, :-1], dim=-1)
    trans = torch.exp(-torch.cat([torch.zeros_like(optical[:, :1]), optical], dim=-1))
    weights = alpha * trans
    colour = (weights[..., None] * rgb).sum(dim=-2)
    acc = weights.sum(dim=-1)
    return colour + (1.0 - acc[..., None]), acc, weights


def scene(pts):
    """Ground-truth density and colour of the object at points [..., 3]."""
    r = pts.norm(dim=-1)
    dens = 40.0 * torch.sigmoid((1.0 - r) * 25.0)
    col = 0.5 + 0.5 * torch.stack([torch.sin(3 * pts[..., 0]), torch.cos(2 * pts[..., 1]),
                                   torch.sin(4 * pts[..., 2] + 1.0)], dim=-1)
    return dens, col


def make_rays(gen):
    """Origins, directions and target colours of every pixel of every view (float32)."""
    focal = 0.5 * W / math.tan(0.5 * 0.69)
    j, i = np.mgrid[0:H, 0:W].astype(np.float64)
    cam_dirs = np.stack([(i - 0.5 * W) / focal, -(j - 0.5 * H) / focal, -np.ones_like(i)], -1)
    origins, dirs = [], []
    for _ in range(N_VIEWS):
        theta, phi = gen.uniform(0, 2 * np.pi), gen.uniform(0.05 * np.pi, 0.4 * np.pi)
        eye = 4.0 * np.array([np.cos(phi) * np.cos(theta), np.cos(phi) * np.sin(theta),
                              np.sin(phi)])
        fwd = -eye / np.linalg.norm(eye)
        right = np.cross(fwd, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, fwd)
        rot = np.stack([right, up, -fwd], axis=1)                # camera -> world
        dirs.append((cam_dirs @ rot.T).reshape(-1, 3))
        origins.append(np.broadcast_to(eye, (H * W, 3)))
    rays_o = torch.from_numpy(np.concatenate(origins).astype(np.float32)).to(dev)
    rays_d = torch.from_numpy(np.concatenate(dirs).astype(np.float32)).to(dev)
    target = torch.empty_like(rays_o)
    t = torch.linspace(NEAR, FAR, 257, device=dev)
    for s in range(0, rays_o.shape[0], 16384):                  # dense quadrature
        o, d = rays_o[s:s + 16384], rays_d[s:s + 16384]
        dens, col = scene(o[:, None] + d[:, None] * t[None, :, None])
        a = 1.0 - torch.exp(-dens * (t[1] - t[0]) * d.norm(dim=-1, keepdim=True))
        tr = torch.cumprod(torch.cat([torch.ones_like(a[:, :1]), 1.0 - a[:, :-1]], 1), 1)
        w = a * tr
        target[s:s + 16384] = (w[..., None] * col).sum(1) + (1.0 - w.sum(1))[:, None]
    return rays_o, rays_d, target


all_o, all_d, all_rgb = make_rays(np.random.default_rng(0))
rays = torch.cat([all_o, all_d, all_rgb], dim=1)
rays = rays[torch.randperm(rays.shape[0], device=dev)]          # shuffled once
del all_o, all_d, all_rgb
model = NeRF().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=5e-4)
bands = (2.0 ** torch.arange(L_XYZ, dtype=torch.float32)).to(dev)
z_lin = torch.linspace(NEAR, FAR, N_SAMPLES, device=dev).expand(N_RAYS, N_SAMPLES)
mids = 0.5 * (z_lin[:, 1:] + z_lin[:, :-1])
upper = torch.cat([mids, z_lin[:, -1:]], dim=-1)
lower = torch.cat([z_lin[:, :1], mids], dim=-1)
bin_width = upper - lower
state = {"next": 0}
out = {}


def step():
    start = state["next"]
    state["next"] = (start + N_RAYS) % (rays.shape[0] - N_RAYS)
    batch = rays[start:start + N_RAYS]
    rays_o, rays_d, target = batch[:, 0:3], batch[:, 3:6], batch[:, 6:9]
    z = lower + bin_width * torch.rand(N_RAYS, N_SAMPLES, device=dev)
    pts = rays_o[:, None, :] + rays_d[:, None, :] * z[..., None]          # [R, S, 3]
    x_enc = posenc(pts.reshape(-1, 3), bands)

    opt.zero_grad(set_to_none=True)
    raw = model(x_enc).view(N_RAYS, N_SAMPLES, 4)
    colour, _, _ = render(raw, z, rays_d)
    loss = F.mse_loss(colour, target)
    loss.backward()
    opt.step()
    out.update(loss=loss.detach(), colour=colour.detach(), raw=raw.detach(), z=z,
               rays_d=rays_d, x_enc=x_enc, pts=pts)


def check():
    loss = float(out["loss"])
    if not (np.isfinite(loss) and 0.0 < loss < 1.0):
        raise AssertionError(f"loss {loss}")
    for name, prm in model.named_parameters():
        if not torch.isfinite(prm).all():
            raise AssertionError(f"non-finite parameter {name}")
    # positional encoding of a few points
    pts = out["pts"].reshape(-1, 3)[:64].double().cpu().numpy()
    xb = (pts[:, None, :] * 2.0 ** np.arange(L_XYZ)[:, None]).reshape(64, -1)
    want = np.concatenate([pts, np.sin(xb), np.cos(xb)], axis=1)
    got = out["x_enc"][:64].double().cpu().numpy()
    if not np.allclose(got, want, atol=2e-4):
        raise AssertionError("positional encoding differs from NumPy")
    # volume rendering of 16 rays in float64 (alpha compositing with a cumulative product)
    raw = out["raw"][:16].double().cpu().numpy()
    rgb = 1.0 / (1.0 + np.exp(-raw[..., :3]))
    sig = np.maximum(raw[..., 3], 0.0)
    z = out["z"][:16].double().cpu().numpy()
    d = np.linalg.norm(out["rays_d"][:16].double().cpu().numpy(), axis=-1, keepdims=True)
    delta = np.concatenate([np.diff(z, axis=1), np.full((16, 1), 1e10)], axis=1) * d
    a = 1.0 - np.exp(-sig * delta)
    tr = np.cumprod(np.concatenate([np.ones((16, 1)), 1.0 - a[:, :-1]], 1), 1)
    w = a * tr
    want = (w[..., None] * rgb).sum(1) + (1.0 - w.sum(1))[:, None]
    got = out["colour"][:16].double().cpu().numpy()
    if not np.allclose(got, want, atol=1e-4):
        raise AssertionError(f"rendered colour differs by {np.abs(got - want).max():.3g}")


run(step, name="torch_nerf_train", backend="torch", args=args,
    variant="tf32" if args.tf32 else "baseline", check=check)
