"""One training step of a VQ-VAE (van den Oord et al. 2017) on 128 x 128 RGB images, in FP32.

A batch of 32 images (smooth random colour fields with edges and texture, a dataset of 512
made once on the device, values in [-0.5, 0.5]). The encoder is two 4 x 4 stride-2
convolutions with ReLU (3 -> 128 -> 128 channels) and a 3 x 3 convolution to the 64-wide
latent, a 32 x 32 grid (32768 latent vectors a batch). The vector quantiser holds a codebook
of 512 codes of 64 (``nn.Embedding``, uniform init); each latent takes its nearest code
(squared Euclidean distance, ``argmin``), the codebook and commitment losses (beta 0.25) are
MSEs against detached copies and the gradient passes to the encoder through the
straight-through estimator ``z + (z_q - z).detach()``. The decoder mirrors the encoder (a
3 x 3 convolution, two 4 x 4 stride-2 transposed convolutions); reconstruction MSE; Adam
(lr 2e-4, PyTorch's default implementation).

The distances are computed the way many VQ-VAE repositories write them, by broadcasting
``(z[:, None, :] - codebook[None]) ** 2`` and summing over the last axis, which
materialises a [32768, 512, 64] float32 tensor (4.3 GB) twice. ``--matmul-dist`` computes
``|z|^2 - 2 z.e + |e|^2`` with one ``torch.addmm`` ([32768, 512], 64 MB) instead, as the
reference Sonnet/DeepMind implementation does. PyTorch defaults: FP32 matmuls (TF32 off),
cuDNN convolutions may use TF32.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--matmul-dist", action="store_true",
               help="codebook distances with one addmm instead of a broadcast difference")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
BATCH, RES, HID, EMB_DIM, N_CODES, BETA, DATASET = 32, 128, 128, 64, 512, 0.25, 512


class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost, matmul_dist):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        self.embedding.weight.data.uniform_(-1.0 / num_embeddings, 1.0 / num_embeddings)
        self.commitment_cost = commitment_cost
        self.matmul_dist = matmul_dist

    def forward(self, z):
        z = z.permute(0, 2, 3, 1).contiguous()              # BCHW -> BHWC
        flat = z.view(-1, z.shape[-1])
        w = self.embedding.weight
        if self.matmul_dist:
            d = torch.addmm(torch.sum(w ** 2, dim=1), flat, w.t(), alpha=-2.0) \
                + torch.sum(flat ** 2, dim=1, keepdim=True)
        else:
            d = torch.sum((flat.unsqueeze(1) - w.unsqueeze(0)) ** 2, dim=2)
        codes = torch.argmin(d, dim=1)
        z_q = self.embedding(codes).view(z.shape)
        codebook_loss = F.mse_loss(z_q, z.detach())
        commitment_loss = F.mse_loss(z, z_q.detach())
        loss = codebook_loss + self.commitment_cost * commitment_loss
        z_q = z + (z_q - z).detach()                          # straight-through estimator
        return z_q.permute(0, 3, 1, 2).contiguous(), loss, codes


class VQVAE(nn.Module):
    def __init__(self, matmul_dist):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, HID, 4, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(HID, HID, 4, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(HID, EMB_DIM, 3, padding=1))
        self.vq = VectorQuantizer(N_CODES, EMB_DIM, BETA, matmul_dist)
        self.decoder = nn.Sequential(
            nn.Conv2d(EMB_DIM, HID, 3, padding=1), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(HID, HID, 4, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(HID, 3, 4, stride=2, padding=1))

    def forward(self, x):
        z = self.encoder(x)
        z_q, vq_loss, codes = self.vq(z)
        return self.decoder(z_q), vq_loss, codes


def make_images(gen, n):
    """[n, 3, RES, RES] float32 in [-0.5, 0.5]: low-frequency colour fields, edges, texture."""
    low = torch.randn(n, 3, 8, 8, generator=gen)
    img = F.interpolate(low, size=(RES, RES), mode="bicubic", align_corners=False)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, RES), torch.linspace(-1, 1, RES), indexing="ij")
    ang = torch.rand(n, 1, 1, generator=gen) * 6.2832
    off = torch.rand(n, 1, 1, generator=gen) - 0.5
    edge = torch.sigmoid(40 * (xx * torch.cos(ang) + yy * torch.sin(ang) - off))
    img = img + 1.5 * edge[:, None] * torch.randn(n, 3, 1, 1, generator=gen)
    img = img + 0.1 * torch.randn(n, 3, RES, RES, generator=gen)
    return (torch.sigmoid(img) - 0.5).float()


data = make_images(torch.Generator().manual_seed(0), DATASET).to(dev)
model = VQVAE(args.matmul_dist).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=2e-4)
out = {}


def step():
    idx = torch.randint(0, DATASET, (BATCH,), device=dev)
    x = data[idx]
    x_rec, vq_loss, codes = model(x)
    rec_loss = F.mse_loss(x_rec, x)
    loss = rec_loss + vq_loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    out.update(loss=loss.detach(), rec=rec_loss.detach(), codes=codes, x=x)


def check():
    loss, rec = float(out["loss"]), float(out["rec"])
    if not (0.0 < rec < 0.2 and rec <= loss < 10.0):
        raise AssertionError(f"loss {loss}, reconstruction {rec}")
    codes = out["codes"]
    if tuple(codes.shape) != (BATCH * (RES // 4) ** 2,) or codes.min() < 0 or codes.max() >= N_CODES:
        raise AssertionError("bad codes")
    # the nearest codes of the current encoder, against a float64 brute force on 2048 latents
    with torch.no_grad():
        z = model.encoder(out["x"][:2]).permute(0, 2, 3, 1).reshape(-1, EMB_DIM)
        _, _, got = model.vq(model.encoder(out["x"][:2]))
        w = model.vq.embedding.weight.double()
        d = torch.cdist(z.double(), w) ** 2
        want = d.argmin(1)
        picked = d.gather(1, got[:, None]).squeeze(1)
        best = d.gather(1, want[:, None]).squeeze(1)
    # ties within rounding may pick another code of the same distance
    if not torch.all(picked <= best + 1e-5 * (1 + best)):
        raise AssertionError("quantiser did not pick the nearest code")
    if (got == want).float().mean() < 0.99:
        raise AssertionError("codes differ from the float64 reference")


run(step, name="torch_vqvae_train", backend="torch", args=args,
    variant="matmul_dist" if args.matmul_dist else "baseline", check=check)
