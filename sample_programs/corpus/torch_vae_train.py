"""One training step of a small convolutional variational autoencoder on 64 x 64 RGB images.

A batch of 128 images with values in (0, 1) (smooth random colour fields, made once). The
encoder is three 4 x 4 stride-2 convolutions with ReLU (3 -> 64 -> 128 -> 256 channels,
64^2 -> 8^2), flattened into one Linear that gives the mean and log-variance of a
128-dimensional latent. Reparameterisation: z = mu + eps * exp(0.5 * logvar) with eps from
``torch.randn_like``. The decoder is a Linear 128 -> 256 x 8 x 8 with ReLU and three 4 x 4
stride-2 ``ConvTranspose2d`` back to 3 x 64 x 64 (ReLU between them), then a sigmoid.

The forward runs under ``torch.autocast`` in bfloat16. The loss is computed in float32 after
the autocast region, on ``.float()`` copies of the reconstruction, mean and log-variance
(``F.binary_cross_entropy`` is not allowed under autocast): the summed binary cross-entropy
of the reconstruction plus the KL divergence to the unit Gaussian, divided by the batch
size. Then backward and a ``torch.optim.Adam`` step (lr 1e-3, PyTorch's default
implementation choice).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
B, LATENT = 128, 128


class ConvVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 64, 4, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 128, 4, 2, 1), nn.ReLU(),
            nn.Conv2d(128, 256, 4, 2, 1), nn.ReLU(),
            nn.Flatten())
        self.to_stats = nn.Linear(256 * 8 * 8, 2 * LATENT)
        self.from_latent = nn.Linear(LATENT, 256 * 8 * 8)
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(256, 128, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(64, 3, 4, 2, 1))

    def encode(self, x):
        mu, logvar = self.to_stats(self.encoder(x)).chunk(2, dim=1)
        return mu, logvar

    def decode(self, z):
        h = F.relu(self.from_latent(z)).view(-1, 256, 8, 8)
        return torch.sigmoid(self.decoder(h))

    def forward(self, x):
        mu, logvar = self.encode(x)
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        z = mu + eps * std
        return self.decode(z), mu, logvar


def vae_loss(recon, x, mu, logvar):
    bce = F.binary_cross_entropy(recon, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + kld) / x.shape[0]


model = ConvVAE().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
with torch.no_grad():
    coarse = torch.randn(B, 3, 8, 8, device=dev)
    x = torch.sigmoid(2.0 * F.interpolate(coarse, size=(64, 64), mode="bilinear",
                                          align_corners=False))
out = {}


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev, dtype=torch.bfloat16):
        recon, mu, logvar = model(x)
    recon, mu, logvar = recon.float(), mu.float(), logvar.float()
    loss = vae_loss(recon, x, mu, logvar)
    loss.backward()
    opt.step()
    out.update(loss=loss.detach(), recon=recon.detach(), mu=mu.detach(),
               logvar=logvar.detach())


def check():
    # the step's loss against a float64 recomputation from the same tensors
    r, mu, lv = (out[k].double() for k in ("recon", "mu", "logvar"))
    xd = x.double()
    bce = -(xd * torch.log(r).clamp(min=-100) + (1 - xd) * torch.log(1 - r).clamp(min=-100))
    kld = -0.5 * (1 + lv - mu.pow(2) - lv.exp()).sum()
    ref = float((bce.sum() + kld) / B)
    got = float(out["loss"])
    if not abs(got - ref) <= 1e-3 * abs(ref):
        raise AssertionError(f"loss {got} vs float64 recomputation {ref}")
    # the bf16 encoder against a float32 run of the same (updated) weights
    with torch.no_grad():
        with torch.autocast(dev, dtype=torch.bfloat16):
            mu_bf16, _ = model.encode(x)
        mu_fp32, _ = model.encode(x)
    err = float((mu_bf16.float() - mu_fp32).abs().max() / mu_fp32.abs().max())
    if not err < 0.1:
        raise AssertionError(f"bf16 and float32 encoder means differ by {err:.3g}")
    for name, prm in model.named_parameters():
        if not torch.isfinite(prm).all():
            raise AssertionError(f"non-finite parameter {name}")


run(step, name="torch_vae_train", backend="torch", args=args, check=check)
