"""One training step of a DLRM-style recommender: eight EmbeddingBag tables (sum pooling),
a bottom MLP for dense features, pairwise feature interaction, a top MLP, BCE loss, and Adam
with PyTorch's default (foreach) implementation. ``--fused-adam`` uses ``Adam(fused=True)``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--fused-adam", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
B, TABLES, ROWS, DIM, BAG, DENSE = 4096, 8, 50_000, 64, 16, 13


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.ModuleList(nn.EmbeddingBag(ROWS, DIM, mode="sum") for _ in range(TABLES))
        self.bottom = nn.Sequential(nn.Linear(DENSE, 256), nn.ReLU(), nn.Linear(256, DIM),
                                    nn.ReLU())
        n = TABLES + 1
        self.top = nn.Sequential(nn.Linear(n * (n - 1) // 2 + DIM, 512), nn.ReLU(),
                                 nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))
        self.iu = torch.triu_indices(n, n, 1)

    def forward(self, dense, idx, offsets):
        d = self.bottom(dense)
        feats = torch.stack([d] + [e(idx[t], offsets) for t, e in enumerate(self.emb)], dim=1)
        inter = torch.bmm(feats, feats.transpose(1, 2))[:, self.iu[0], self.iu[1]]
        return self.top(torch.cat([d, inter], dim=1)).squeeze(1)


model = DLRM().to(dev).train()
opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=args.fused_adam)
dense = torch.randn(B, DENSE, device=dev)
idx = torch.randint(0, ROWS, (TABLES, B * BAG), device=dev)
offsets = torch.arange(0, B * BAG, BAG, device=dev)
label = torch.randint(0, 2, (B,), device=dev).float()


def step():
    opt.zero_grad(set_to_none=True)
    loss = F.binary_cross_entropy_with_logits(model(dense, idx, offsets), label)
    loss.backward()
    opt.step()


run(step, name="torch_recsys_train", backend="torch", args=args,
    variant="fused_adam" if args.fused_adam else "baseline")
