"""Per-pixel alpha compositing of depth-sorted 2-D Gaussians, Gaussian-splatting style, in
eager FP32 PyTorch (a renderer prototype without a custom CUDA rasteriser).

A scene of 200000 projected Gaussians (screen-space means, 2 x 2 covariances from a scale
and a rotation, opacity, RGB colour, view-space depth) is rendered into 4 views of
800 x 800 pixels. The per-tile binning is done once, as a preprocessing step: the image is
split into 16 x 16-pixel tiles and each tile keeps the K = 12 nearest-in-depth Gaussians
whose 3-sigma footprint touches it, sorted front to back (an int64 [views, tiles, K] index
list). The step renders: every pixel gathers its tile's K Gaussians, evaluates
``alpha = min(0.99, opacity * exp(-0.5 * d^T Sigma^-1 d))`` (the conic form of the 3D-GS
paper, alphas below 1/255 dropped) and composites front to back,
``C = sum_k c_k alpha_k T_k`` with ``T_k = prod_{j<k} (1 - alpha_j)``, plus a white background
weighted by the final transmittance.

The compositing is the loop the paper's pseudo-code describes, written per Gaussian slot in
Python over the K slots (each iteration reads one column of the [pixels, K] alpha and
colour tensors). ``--vectorized`` computes all transmittances at once with an exclusive
``torch.cumprod`` over the slot axis and the colour with one weighted sum.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--vectorized", action="store_true",
               help="exclusive cumprod over the K slots instead of a Python loop")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
N_GAUSS, VIEWS, H, W, TILE, K = 200_000, 4, 800, 800, 16, 12
TH, TW = H // TILE, W // TILE


def make_scene(gen):
    """Screen-space Gaussians per view: means [V, N, 2], conics [V, N, 3], opacity, rgb, depth."""
    mean = torch.rand(VIEWS, N_GAUSS, 2, generator=gen) * torch.tensor([W, H])
    scale = torch.exp(torch.randn(VIEWS, N_GAUSS, 2, generator=gen) * 0.5 + math.log(4.0))
    theta = torch.rand(VIEWS, N_GAUSS, generator=gen) * math.pi
    c, s = torch.cos(theta), torch.sin(theta)
    sx2, sy2 = scale[..., 0] ** 2, scale[..., 1] ** 2
    cov_xx = c * c * sx2 + s * s * sy2
    cov_xy = c * s * (sx2 - sy2)
    cov_yy = s * s * sx2 + c * c * sy2
    det = cov_xx * cov_yy - cov_xy ** 2
    conic = torch.stack([cov_yy / det, -cov_xy / det, cov_xx / det], -1)
    radius = 3.0 * scale.max(-1).values
    opacity = torch.sigmoid(torch.randn(VIEWS, N_GAUSS, generator=gen) + 1.0)
    rgb = torch.rand(VIEWS, N_GAUSS, 3, generator=gen)
    depth = torch.rand(VIEWS, N_GAUSS, generator=gen) * 10 + 0.5
    return mean, conic, radius, opacity, rgb, depth


def bin_tiles(mean, radius, depth):
    """[V, TH * TW, K] int64 front-to-back Gaussian lists per tile (-1 where fewer than K)."""
    lists = torch.full((VIEWS, TH * TW, K), -1, dtype=torch.int64)
    for v in range(VIEWS):
        x0 = ((mean[v, :, 0] - radius[v]) // TILE).clamp(0, TW - 1).long()
        x1 = ((mean[v, :, 0] + radius[v]) // TILE).clamp(0, TW - 1).long()
        y0 = ((mean[v, :, 1] - radius[v]) // TILE).clamp(0, TH - 1).long()
        y1 = ((mean[v, :, 1] + radius[v]) // TILE).clamp(0, TH - 1).long()
        ids, tiles = [], []
        for dy in range(int((y1 - y0).max()) + 1):
            for dx in range(int((x1 - x0).max()) + 1):
                ok = (y0 + dy <= y1) & (x0 + dx <= x1)
                g = ok.nonzero().squeeze(1)
                ids.append(g)
                tiles.append((y0[g] + dy) * TW + x0[g] + dx)
        ids, tiles = torch.cat(ids), torch.cat(tiles)
        order = torch.argsort(tiles.double() * 100.0 + depth[v, ids].double())  # tile, then depth
        ids, tiles = ids[order], tiles[order]
        start = torch.searchsorted(tiles, torch.arange(TH * TW))
        rank = torch.arange(tiles.numel()) - start[tiles]
        keep = rank < K
        lists[v, tiles[keep], rank[keep]] = ids[keep]
    return lists


mean, conic, radius, opacity, rgb, depth = make_scene(torch.Generator().manual_seed(0))
lists = bin_tiles(mean, radius, depth)
# per-pixel index of its tile, and pixel centres
py, px = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
pix_tile = ((py // TILE) * TW + px // TILE).reshape(-1)                  # [H * W]
pix_xy = torch.stack([px.reshape(-1) + 0.5, py.reshape(-1) + 0.5], -1)  # [H * W, 2]
# pad the Gaussian tables with one transparent entry (index N_GAUSS) for the -1 slots
lists = torch.where(lists < 0, N_GAUSS, lists)
mean = torch.cat([mean, torch.zeros(VIEWS, 1, 2)], 1)
conic = torch.cat([conic, torch.ones(VIEWS, 1, 3)], 1)
opacity = torch.cat([opacity, torch.zeros(VIEWS, 1)], 1)
rgb = torch.cat([rgb, torch.zeros(VIEWS, 1, 3)], 1)
mean, conic, opacity, rgb, lists, pix_tile, pix_xy = (
    t.to(dev) for t in (mean, conic, opacity, rgb, lists, pix_tile, pix_xy))
background = torch.ones(3, device=dev)
out = {}


def gaussian_alpha():
    """alpha [V, H*W, K] and colour [V, H*W, K, 3] of each pixel's K front-to-back Gaussians."""
    g = lists[:, pix_tile]                                   # [V, P, K]
    gi = g.reshape(VIEWS, -1)
    mu = torch.gather(mean, 1, gi[..., None].expand(-1, -1, 2)).view(*g.shape, 2)
    cn = torch.gather(conic, 1, gi[..., None].expand(-1, -1, 3)).view(*g.shape, 3)
    op = torch.gather(opacity, 1, gi).view(g.shape)
    col = torch.gather(rgb, 1, gi[..., None].expand(-1, -1, 3)).view(*g.shape, 3)
    d = pix_xy[None, :, None, :] - mu                        # [V, P, K, 2]
    power = -0.5 * (cn[..., 0] * d[..., 0] ** 2 + cn[..., 2] * d[..., 1] ** 2) \
        - cn[..., 1] * d[..., 0] * d[..., 1]
    alpha = torch.clamp(op * torch.exp(power), max=0.99)
    alpha = torch.where(alpha < 1.0 / 255.0, 0.0, alpha)
    return alpha, col


def composite_loop(alpha, col):
    T = torch.ones(alpha.shape[:2], device=alpha.device)
    C = torch.zeros(*alpha.shape[:2], 3, device=alpha.device)
    for k in range(K):
        a = alpha[..., k]
        C = C + (a * T)[..., None] * col[..., k, :]
        T = T * (1.0 - a)
    return C + T[..., None] * background, T


def composite_vectorized(alpha, col):
    trans = torch.cumprod(1.0 - alpha, dim=-1)               # T after each slot
    T_before = torch.cat([torch.ones_like(trans[..., :1]), trans[..., :-1]], -1)
    weights = alpha * T_before
    C = (weights[..., None] * col).sum(-2)
    T = trans[..., -1]
    return C + T[..., None] * background, T


composite = composite_vectorized if args.vectorized else composite_loop


@torch.no_grad()
def step():
    alpha, col = gaussian_alpha()
    C, T = composite(alpha, col)
    out["img"] = C.view(VIEWS, H, W, 3)
    out["T"] = T.view(VIEWS, H, W)


def check():
    img, T = out["img"], out["T"]
    if tuple(img.shape) != (VIEWS, H, W, 3) or not torch.isfinite(img).all():
        raise AssertionError("bad image")
    if img.min() < -1e-5 or img.max() > 1 + 1e-5 or T.min() < 0 or T.max() > 1:
        raise AssertionError("colour or transmittance out of range")
    cover = (T < 0.5).float().mean().item()
    if not 0.2 < cover < 0.999:
        raise AssertionError(f"implausible coverage {cover:.3f}")
    # the other compositing order, in float64, on one tile row of view 0
    with torch.no_grad():
        alpha, col = gaussian_alpha()
        rows = slice(0, TILE * W)
        a64, c64 = alpha[:1, rows].double(), col[:1, rows].double()
        other = composite_loop if args.vectorized else composite_vectorized
        want, _ = other(a64, c64)
    got = img[:1].reshape(1, -1, 3)[:, rows].double()
    err = (got - want).abs().max().item()
    if err > 1e-4:
        raise AssertionError(f"compositing differs from float64 reference by {err:.3g}")


run(step, name="torch_splat_composite", backend="torch", args=args,
    variant="vectorized" if args.vectorized else "baseline", check=check)
