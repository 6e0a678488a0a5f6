"""PyTorch library-backed ops: one step of CUDA ops that call into CUB, cuFFT, cuSOLVER,
cuSPARSE, cuBLAS and cuDNN, or into PyTorch's own sampling and indexing kernels.

Sort, top-k (2048 x 32768), unique, nonzero and cumsum (CUB); a batched 2-D real FFT; a
1024x1024 Cholesky; 1M x 1M CSR times a 1M x 16 dense matrix; an odd-shaped fp16 bmm; an
fp16 7x7 stride-2 stem convolution; 2^25 random normals; multinomial sampling over a
50000-entry vocabulary; scatter_add into 1000 buckets; a mean embedding_bag.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
import torch.nn.functional as F

from common import parser, run

args = parser(__doc__).parse_args()

dev = "cuda"
torch.manual_seed(0)

# CUB-backed ops: one 2^24 float vector is sorted, scanned and scattered
x = torch.randn(1 << 24, device=dev)
mask = torch.rand(1 << 24, device=dev) < 0.1
scores = torch.randn(2048, 32768, device=dev)
ids = torch.randint(0, 1 << 20, (1 << 22,), device=dev)  # int64

# batched 2-D real FFT
vol = torch.randn(64, 512, 512, device=dev)

# Cholesky of a 1024x1024 SPD matrix
G = torch.randn(1024, 1024, device=dev)
spd = G @ G.T / 1024 + torch.eye(1024, device=dev)
del G

# 1M x 1M CSR with 8 nonzeros a row (sorted column indices), times a 1M x 16 dense matrix
N_SP, PER_ROW = 1 << 20, 8
crow = torch.arange(0, N_SP * PER_ROW + 1, PER_ROW, dtype=torch.int32, device=dev)
col = torch.randint(0, N_SP, (N_SP, PER_ROW), dtype=torch.int32, device=dev)
col = col.sort(dim=1).values.reshape(-1)
val = torch.rand(N_SP * PER_ROW, device=dev)
S = torch.sparse_csr_tensor(crow, col, val, size=(N_SP, N_SP))
D = torch.randn(N_SP, 16, device=dev)

# fp16 bmm on odd shapes and an fp16 ImageNet-style stem convolution
a16 = torch.randn(512, 77, 129, device=dev, dtype=torch.half)
b16 = torch.randn(512, 129, 65, device=dev, dtype=torch.half)
img = torch.randn(64, 3, 224, 224, device=dev, dtype=torch.half)
w = (torch.randn(64, 3, 7, 7, device=dev) * 0.1).half()

# multinomial: unnormalised fp16 weights over a 50000-entry vocabulary, one heavy entry a row
VOCAB = 50000
ROWS = 2048
target = torch.randint(0, VOCAB, (ROWS,), device=dev)
weights = torch.rand(ROWS, VOCAB, device=dev, dtype=torch.half).mul_(1e-3)
weights[torch.arange(ROWS, device=dev), target] = 50.0  # about 2/3 of each row's mass

# scatter_add of the 2^24 values into 1000 buckets
buckets = torch.randint(0, 1000, (1 << 24,), device=dev)

# embedding_bag: 65536 bags of 20 rows from a 1M x 64 table
table = torch.randn(1_000_000, 64, device=dev)
bag_idx = torch.randint(0, 1_000_000, (65536 * 20,), device=dev)
bag_off = torch.arange(0, 65536 * 20, 20, device=dev)

torch.cuda.synchronize()
torch.cuda.empty_cache()  # give back the setup temporaries
out = {}


def step():
    out.clear()  # drop the previous step's results first
    with torch.inference_mode():
        out["sample"] = torch.multinomial(weights, 1)        # checks the weights (syncs), then samples
        out["sort"] = torch.sort(x).values                    # values (the int64 indices are dropped)
        out["topk"] = torch.topk(scores, 64, dim=1)           # 64 largest of each row, sorted
        out["unique"] = torch.unique(ids)                     # sort + unique (syncs for the count)
        out["nonzero"] = torch.nonzero(mask)                  # count (syncs) + compaction
        out["cumsum"] = torch.cumsum(x, 0)
        out["rfft2"] = torch.fft.rfft2(vol)                   # 64 x 512 x 257 complex
        out["chol"] = torch.linalg.cholesky(spd)              # potrf; checks info (syncs)
        out["spmm"] = S @ D                                   # cuSPARSE SpMM
        out["bmm"] = torch.bmm(a16, b16)                      # 512 x (77x129 @ 129x65)
        out["conv"] = F.conv2d(img, w, stride=2, padding=3)   # 64 x 64 x 112 x 112
        out["randn"] = torch.randn(1 << 25, device=dev)
        out["hist"] = torch.zeros(1000, device=dev).scatter_add_(0, buckets, x)
        out["bag"] = F.embedding_bag(bag_idx, table, bag_off, mode="mean")


def close(got, ref, tol, what):
    got, ref = got.cpu(), ref.cpu()
    if got.is_complex():
        got, ref = torch.view_as_real(got), torch.view_as_real(ref)
    got, ref = got.double(), ref.double()
    err = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    if not err < tol:
        raise AssertionError(f"{what}: relative error {err:.3g} exceeds {tol:g}")


def check():
    xc = x.cpu()

    hits = (out["sample"].squeeze(1) == target).float().mean().item()
    if not 0.6 < hits < 0.73:
        raise AssertionError(f"multinomial: heavy entry drawn {hits:.3f} of the time")

    if not torch.equal(out["sort"].cpu(), torch.sort(xc).values):
        raise AssertionError("sort mismatch")

    tv, ti = out["topk"]
    rows = scores[:32].cpu()
    ref_tv = torch.topk(rows, 64, dim=1).values
    if not (torch.equal(tv[:32].cpu(), ref_tv)
            and torch.equal(rows.gather(1, ti[:32].cpu()), ref_tv)):
        raise AssertionError("topk mismatch")

    if not torch.equal(out["unique"].cpu(), torch.unique(ids.cpu())):
        raise AssertionError("unique mismatch")
    if not torch.equal(out["nonzero"].cpu(), torch.nonzero(mask.cpu())):
        raise AssertionError("nonzero mismatch")
    close(out["cumsum"][::4099], torch.cumsum(xc.double(), 0)[::4099], 1e-4, "cumsum")
    close(out["rfft2"][:2], torch.fft.rfft2(vol[:2].cpu()), 1e-4, "rfft2")

    L = out["chol"].double().cpu()
    if torch.triu(L, 1).abs().max().item() != 0:
        raise AssertionError("cholesky: factor is not lower triangular")
    close(L @ L.T, spd, 1e-4, "cholesky")

    # first 4096 rows of the SpMM, recomputed on the CPU from the CSR arrays
    k = 4096 * PER_ROW
    contrib = val[:k].double().cpu()[:, None] * D.double().cpu()[col[:k].long().cpu()]
    row_of = torch.arange(4096).repeat_interleave(PER_ROW)
    ref = torch.zeros(4096, 16, dtype=torch.float64).index_add_(0, row_of, contrib)
    close(out["spmm"][:4096], ref, 1e-4, "spmm")

    close(out["bmm"][:8], torch.bmm(a16[:8].float().cpu(), b16[:8].float().cpu()), 2e-3, "bmm")
    close(out["conv"][:2], F.conv2d(img[:2].float().cpu(), w.float().cpu(), stride=2, padding=3),
          5e-3, "conv2d")

    z = out["randn"]
    if not (abs(z.mean().item()) < 1e-3 and abs(z.std().item() - 1) < 1e-3):
        raise AssertionError("randn: moments off")

    ref = torch.zeros(1000, dtype=torch.float64).index_add_(0, buckets.cpu(), xc.double())
    close(out["hist"], ref, 1e-4, "scatter_add")

    ref = table.cpu()[bag_idx[:128 * 20].cpu()].view(128, 20, 64).mean(1)
    close(out["bag"][:128], ref, 1e-5, "embedding_bag")


run(step, name="torch_library_ops", backend="torch", args=args, check=check)
