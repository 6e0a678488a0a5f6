"""One training step of a 2-layer graph convolutional network (GCN) for node classification,
written with plain PyTorch tensor ops on an edge list.

A random graph of 65536 nodes and ~1M directed edges (plus self loops) with symmetric degree
normalisation; 128 input features, 128 hidden, 32 classes; FP32, Adam (foreach) with
PyTorch's defaults. Each layer is a Linear followed by message passing: the source rows are
gathered with ``index_select``, scaled by the edge weight and summed into the destination
rows with ``index_add_``. ``--spmm`` does the message passing as a sparse CSR matrix
product instead (``torch.sparse.mm``, with the transposed matrix for the backward pass).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import DEV, parser, run

p = parser(__doc__)
p.add_argument("--spmm", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
N_NODES, N_EDGES, F_IN, HIDDEN, CLASSES = 65536, 1 << 20, 128, 128, 32

# Random directed edges plus self loops; GCN weights 1 / sqrt(deg(src) deg(dst)).
src = torch.randint(0, N_NODES, (N_EDGES,))
dst = torch.randint(0, N_NODES, (N_EDGES,))
loops = torch.arange(N_NODES)
src = torch.cat([src, loops])
dst = torch.cat([dst, loops])
deg = torch.bincount(dst, minlength=N_NODES).float()
edge_w = deg[src].rsqrt() * deg[dst].rsqrt()
src, dst, edge_w = src.to(dev), dst.to(dev), edge_w.to(dev)


def csr(rows, cols, vals):
    order = torch.argsort(rows * N_NODES + cols)
    coo = torch.sparse_coo_tensor(torch.stack([rows[order], cols[order]]), vals[order],
                                  (N_NODES, N_NODES), check_invariants=False).coalesce()
    return coo.to_sparse_csr()


class SparseAggregate(torch.autograd.Function):
    """out = A @ h with A constant; the backward pass multiplies by A^T."""

    @staticmethod
    def forward(ctx, a, a_t, h):
        ctx.a_t = a_t
        return torch.sparse.mm(a, h)

    @staticmethod
    def backward(ctx, grad):
        return None, None, torch.sparse.mm(ctx.a_t, grad)


if args.spmm:
    adj = csr(dst, src, edge_w)       # row = destination
    adj_t = csr(src, dst, edge_w)


def aggregate(h):
    if args.spmm:
        return SparseAggregate.apply(adj, adj_t, h)
    msg = h.index_select(0, src) * edge_w.unsqueeze(1)
    return torch.zeros_like(h).index_add_(0, dst, msg)


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(F_IN, HIDDEN)
        self.lin2 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        h = F.relu(aggregate(self.lin1(x)))
        return aggregate(self.lin2(h))


model = GCN().to(dev).train()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(N_NODES, F_IN, device=dev)
y = torch.randint(0, CLASSES, (N_NODES,), device=dev)
train_mask = torch.rand(N_NODES, device=dev) < 0.5
train_idx = train_mask.nonzero().squeeze(1)
y_train = y[train_idx]


def step():
    opt.zero_grad(set_to_none=True)
    out = model(x)
    loss = F.cross_entropy(out[train_idx], y_train)
    loss.backward()
    opt.step()


def check():
    # the two ways of message passing agree (forward, on the current weights)
    h = torch.randn(N_NODES, 8, device=dev)
    msg = h.index_select(0, src) * edge_w.unsqueeze(1)
    ref = torch.zeros_like(h).index_add_(0, dst, msg)
    got = torch.sparse.mm(csr(dst, src, edge_w), h)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


run(step, name="torch_gnn_train", backend="torch", args=args, check=check,
    variant="spmm" if args.spmm else "baseline")
