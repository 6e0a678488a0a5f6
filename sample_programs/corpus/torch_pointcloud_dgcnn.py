"""Inference of a DGCNN-style point-cloud classifier (EdgeConv) on a test batch, in FP32.

A batch of 32 point clouds of 1024 points (x, y, z), ModelNet40-like: 40 classes, each a
noisy sample around a class-specific set of anchor points, made once on the host. The
model has random weights and BatchNorm running statistics set as after training; it runs
in ``eval()`` mode under ``torch.inference_mode()``, as in a test loop.

Model (dynamic graph CNN, channels-first [batch, channels, points]):

- four EdgeConv layers (64, 64, 128 and 256 channels). Each one builds the k = 20 nearest
  neighbour graph of its input in feature space (pairwise squared distances from one
  batched matmul and the squared norms, ``topk`` over the last dimension), gathers the
  neighbours' features with one flat index into the [batch * points, channels] view, forms
  the edge features [x_j - x_i, x_i] as a [batch, 2C, points, k] tensor, and applies a
  1 x 1 ``Conv2d`` without bias, ``BatchNorm2d`` and ``LeakyReLU(0.2)``, then a max over the
  k neighbours;
- the four outputs concatenated (512 channels), ``Conv1d(512, 1024, 1)`` + ``BatchNorm1d``
  + LeakyReLU, global max and average pooling over the points (2048 features);
- classifier ``Linear(2048, 512)`` / ``BatchNorm1d`` / LeakyReLU / ``Dropout(0.5)`` /
  ``Linear(512, 256)`` / ``BatchNorm1d`` / LeakyReLU / ``Dropout(0.5)`` / ``Linear(256, 40)``;
  softmax probabilities, the predicted class and the number of correct predictions.

PyTorch's default precision settings (cuDNN convolutions may use TF32, matmuls do not).
"""

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
B, N_POINTS, K, CLASSES = 32, 1024, 20, 40


def knn(x, k):
    """Indices [B, N, k] of the k nearest points (squared distance in feature space)."""
    inner = torch.matmul(x.transpose(2, 1), x)                 # [B, N, N]
    sq = (x * x).sum(dim=1, keepdim=True)                       # [B, 1, N]
    neg_dist = 2 * inner - sq - sq.transpose(2, 1)              # -|xi - xj|^2
    return neg_dist.topk(k=k, dim=-1)[1]


def edge_features(x, k):
    """[B, C, N] -> [B, 2C, N, k] with channels (x_j - x_i, x_i) for the k neighbours j."""
    b, c, n = x.shape
    idx = knn(x, k)
    idx = (idx + torch.arange(b, device=x.device).view(-1, 1, 1) * n).view(-1)
    pts = x.transpose(2, 1).contiguous()                        # [B, N, C]
    nbr = pts.view(b * n, c)[idx].view(b, n, k, c)
    centre = pts.view(b, n, 1, c).expand(-1, -1, k, -1)
    return torch.cat((nbr - centre, centre), dim=3).permute(0, 3, 1, 2).contiguous()


class EdgeConv(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(2 * c_in, c_out, kernel_size=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x):
        h = F.leaky_relu(self.bn(self.conv(edge_features(x, K))), 0.2)
        return h.max(dim=-1)[0]                                  # [B, c_out, N]


class DGCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.ec1 = EdgeConv(3, 64)
        self.ec2 = EdgeConv(64, 64)
        self.ec3 = EdgeConv(64, 128)
        self.ec4 = EdgeConv(128, 256)
        self.emb = nn.Sequential(nn.Conv1d(512, 1024, 1, bias=False), nn.BatchNorm1d(1024),
                                 nn.LeakyReLU(0.2))
        self.head = nn.Sequential(
            nn.Linear(2048, 512, bias=False), nn.BatchNorm1d(512), nn.LeakyReLU(0.2),
            nn.Dropout(0.5),
            nn.Linear(512, 256), nn.BatchNorm1d(256), nn.LeakyReLU(0.2), nn.Dropout(0.5),
            nn.Linear(256, CLASSES))

    def forward(self, pts):                                      # [B, 3, N]
        h1 = self.ec1(pts)
        h2 = self.ec2(h1)
        h3 = self.ec3(h2)
        h4 = self.ec4(h3)
        h = self.emb(torch.cat((h1, h2, h3, h4), dim=1))        # [B, 1024, N]
        g = torch.cat((h.amax(dim=2), h.mean(dim=2)), dim=1)    # [B, 2048]
        return self.head(g)


def trained_like(model, gen):
    """BatchNorm running statistics and affine parameters as a trained model might have."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = m.num_features
            m.running_mean.copy_(torch.from_numpy(gen.normal(0.0, 0.2, c)))
            m.running_var.copy_(torch.from_numpy(gen.uniform(0.5, 2.0, c)))
            m.weight.data.copy_(torch.from_numpy(gen.uniform(0.8, 1.2, c)))
            m.bias.data.copy_(torch.from_numpy(gen.normal(0.0, 0.1, c)))


def make_batch(gen):
    """Points around 6 class-specific anchors, scaled and centred, plus their labels."""
    anchors = gen.normal(size=(CLASSES, 6, 3)) * np.array([1.0, 0.7, 0.4])
    spread = gen.uniform(0.05, 0.25, size=(CLASSES, 6))
    labels = gen.integers(0, CLASSES, B)
    clouds = np.empty((B, 3, N_POINTS), dtype=np.float32)
    for i, c in enumerate(labels):
        which = gen.integers(0, 6, N_POINTS)
        p = anchors[c, which] + gen.normal(size=(N_POINTS, 3)) * spread[c, which, None]
        p -= p.mean(axis=0)
        p /= np.abs(p).max()
        clouds[i] = p.T
    return torch.from_numpy(clouds), torch.from_numpy(labels)


gen = np.random.default_rng(0)
model = DGCNN()
trained_like(model, gen)
model = model.to(dev).eval()
pts, labels = make_batch(gen)
pts, labels = pts.to(dev), labels.to(dev)
out = {}


def step():
    with torch.inference_mode():
        logits = model(pts)
        probs = logits.softmax(dim=-1)
        pred = probs.argmax(dim=-1)
        out["logits"], out["probs"], out["correct"] = logits, probs, (pred == labels).sum()


def check():
    logits = out["logits"]
    if logits.shape != (B, CLASSES) or not torch.isfinite(logits).all():
        raise AssertionError("logits shape or values")
    if not torch.allclose(out["probs"].sum(dim=-1), torch.ones(B, device=dev), atol=1e-5):
        raise AssertionError("probabilities do not sum to 1")
    # the neighbour gather of the first layer against a brute-force search on the host
    with torch.inference_mode():
        feat = edge_features(pts[:2], K).double().cpu().numpy()     # [2, 6, N, K]
    p = pts[:2].double().cpu().numpy()                              # [2, 3, N]
    for b in range(2):
        for i in (0, 17, 511, N_POINTS - 1):
            d = ((p[b] - p[b][:, i:i + 1]) ** 2).sum(axis=0)
            want = np.sort(d)[:K]
            nbr = feat[b, :3, i, :] + feat[b, 3:, i, :]             # x_j recovered
            got = np.sort(((nbr - p[b][:, i:i + 1]) ** 2).sum(axis=0))
            if not np.allclose(got, want, rtol=1e-4, atol=1e-6):
                raise AssertionError(f"cloud {b} point {i}: neighbour distances differ")
            if not np.allclose(feat[b, 3:, i, :], p[b][:, i:i + 1]):
                raise AssertionError(f"cloud {b} point {i}: centre channels differ")
    # the whole model in float64 on the host for two clouds
    ref = DGCNN().double().eval()
    ref.load_state_dict({k: v.double().cpu() for k, v in model.state_dict().items()})
    with torch.inference_mode():
        want = ref(pts[:2].double().cpu())
    got = logits[:2].double().cpu()
    err = float((got - want).abs().max() / want.abs().max())
    if not err < 2e-2:
        raise AssertionError(f"logits differ from the float64 model by {err:.3g}")


run(step, name="torch_pointcloud_dgcnn", backend="torch", args=args, check=check)
