"""Target attention over users' jagged behaviour sequences with a user Triton kernel, in bf16.

The user-history pooling of a ranking model: for each of 16384 requests, the candidate
item's query vector (64 wide) attends over that user's past behaviours, stored jagged (no
padding) as keys and values [total, 64] in bf16 with int64 row offsets, and the
softmax-weighted sum of the values is the pooled history feature. Three behaviour
sequences per request with their own length distributions (log-normal, as long-tailed as
real histories): clicks (mean ~250, up to 8192), add-to-carts (mean ~30) and purchases
(mean ~4, a sixth of the users with none, whose pooled feature is zero).

The Triton kernel (one program per request, 4 warps) walks its user's rows in blocks of
64: scores q . k scaled by 1/sqrt(64) with an elementwise product and a row sum, an online
softmax (running max and rescaled sum) in float32, and the rescaled weighted sum of the
value rows; it writes one fp32 row of 64. The PyTorch control is the scatter formulation of
graph libraries, in float32: gather the query per behaviour (``q[row_ids]``), dot products,
``scatter_reduce`` (amax) for the per-row maximum, ``exp``, ``index_add_`` for the
denominators and for the weighted values.

``--split`` launches the kernel over (request, chunk of 512 behaviours) pairs instead, each
program writing its chunk's running max, sum and weighted values, and a second kernel
merges a request's chunks (flash-decoding style), so a long history is spread over many
programs instead of one.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

REQUESTS, D = 16384, 64
BLOCK_N = 64
CHUNK = 512
# (name, log-normal mu, sigma, max length)
SEQUENCES = (("click", 5.0, 1.0, 8192), ("cart", 3.0, 1.0, 1024), ("purchase", 1.0, 1.0, 256))


@triton.jit
def jagged_attention_kernel(q_ptr, k_ptr, v_ptr, offsets_ptr, out_ptr, scale,
                            D: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    start = tl.load(offsets_ptr + row)
    end = tl.load(offsets_ptr + row + 1)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + row * D + cols).to(tl.float32) * scale

    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask = offs_n < end
        k = tl.load(k_ptr + offs_n[:, None] * D + cols[None, :], mask=mask[:, None], other=0.0)
        s = tl.sum(k.to(tl.float32) * q[None, :], axis=1)
        s = tl.where(mask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_ptr + offs_n[:, None] * D + cols[None, :], mask=mask[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
    out = tl.where(l_i > 0, acc / l_i, 0.0)
    tl.store(out_ptr + row * D + cols, out)


@triton.jit
def jagged_attention_split_kernel(q_ptr, k_ptr, v_ptr, offsets_ptr, part_ml_ptr, part_acc_ptr,
                                  scale, max_chunks, D: tl.constexpr, BLOCK_N: tl.constexpr,
                                  CHUNK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    start = tl.load(offsets_ptr + row)
    end = tl.load(offsets_ptr + row + 1)
    c_start = start + chunk * CHUNK
    if c_start < end:
        c_end = tl.minimum(c_start + CHUNK, end)
        cols = tl.arange(0, D)
        q = tl.load(q_ptr + row * D + cols).to(tl.float32) * scale
        m_i = float("-inf")
        l_i = 0.0
        acc = tl.zeros([D], dtype=tl.float32)
        for n0 in range(c_start, c_end, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask = offs_n < c_end
            k = tl.load(k_ptr + offs_n[:, None] * D + cols[None, :], mask=mask[:, None],
                        other=0.0)
            s = tl.sum(k.to(tl.float32) * q[None, :], axis=1)
            s = tl.where(mask, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=0))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new)
            v = tl.load(v_ptr + offs_n[:, None] * D + cols[None, :], mask=mask[:, None],
                        other=0.0)
            acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
            l_i = l_i * alpha + tl.sum(p, axis=0)
            m_i = m_new
        part = row * max_chunks + chunk
        tl.store(part_ml_ptr + part * 2, m_i)
        tl.store(part_ml_ptr + part * 2 + 1, l_i)
        tl.store(part_acc_ptr + part * D + cols, acc)


@triton.jit
def jagged_attention_merge_kernel(offsets_ptr, part_ml_ptr, part_acc_ptr, out_ptr, max_chunks,
                                  D: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    n = tl.load(offsets_ptr + row + 1) - tl.load(offsets_ptr + row)
    n_chunks = tl.cdiv(n, CHUNK)
    cols = tl.arange(0, D)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for c in range(0, n_chunks):
        part = row * max_chunks + c
        m_c = tl.load(part_ml_ptr + part * 2)
        l_c = tl.load(part_ml_ptr + part * 2 + 1)
        a_c = tl.load(part_acc_ptr + part * D + cols)
        m_new = tl.maximum(m_i, m_c)
        alpha = tl.exp(m_i - m_new)
        beta = tl.exp(m_c - m_new)
        acc = acc * alpha + a_c * beta
        l_i = l_i * alpha + l_c * beta
        m_i = m_new
    out = tl.where(l_i > 0, acc / l_i, 0.0)
    tl.store(out_ptr + row * D + cols, out)


def jagged_attention(q, k, v, offsets, max_len, split=False):
    """q [R, D], k/v [total, D] bf16, offsets [R + 1] int64 -> pooled [R, D] float32."""
    rows = q.shape[0]
    out = torch.empty((rows, D), device=q.device, dtype=torch.float32)
    scale = 1.0 / math.sqrt(D)
    if not split:
        jagged_attention_kernel[(rows,)](q, k, v, offsets, out, scale, D=D, BLOCK_N=BLOCK_N,
                                         num_warps=4)
        return out
    max_chunks = triton.cdiv(max_len, CHUNK)
    part_ml = torch.empty((rows, max_chunks, 2), device=q.device, dtype=torch.float32)
    part_acc = torch.empty((rows, max_chunks, D), device=q.device, dtype=torch.float32)
    jagged_attention_split_kernel[(rows, max_chunks)](
        q, k, v, offsets, part_ml, part_acc, scale, max_chunks, D=D, BLOCK_N=BLOCK_N,
        CHUNK=CHUNK, num_warps=4)
    jagged_attention_merge_kernel[(rows,)](offsets, part_ml, part_acc, out, max_chunks, D=D,
                                           CHUNK=CHUNK, num_warps=2)
    return out


def torch_jagged_attention(q, k, v, row_ids):
    """The scatter formulation in float32 (the control)."""
    rows = q.shape[0]
    s = (q.float()[row_ids] * k.float()).sum(dim=-1) / math.sqrt(D)
    s_max = torch.full((rows,), float("-inf"), device=q.device)
    s_max = s_max.scatter_reduce(0, row_ids, s, reduce="amax", include_self=True)
    e = torch.exp(s - s_max[row_ids])
    den = torch.zeros(rows, device=q.device).index_add_(0, row_ids, e)
    p = e / den[row_ids]
    return torch.zeros(rows, D, device=q.device).index_add_(0, row_ids, p[:, None] * v.float())


def make_sequences(gen, dev):
    seqs = []
    for name, mu, sigma, cap in SEQUENCES:
        lengths = np.minimum(np.floor(gen.lognormal(mu, sigma, REQUESTS)), cap).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        total = int(offsets[-1])
        k = (torch.randn(total, D) * 0.5).to(dev, torch.bfloat16)
        v = torch.randn(total, D).to(dev, torch.bfloat16)
        row_ids = torch.repeat_interleave(torch.arange(REQUESTS), torch.from_numpy(lengths))
        seqs.append(dict(name=name, k=k, v=v, offsets=torch.from_numpy(offsets).to(dev),
                         row_ids=row_ids.to(dev), lengths=lengths, max_len=int(lengths.max())))
    return seqs


def main():
    p = parser(__doc__)
    p.add_argument("--split", action="store_true",
                   help="split each history into chunks of 512 and merge the partial results")
    args = p.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    seqs = make_sequences(np.random.default_rng(0), dev)
    queries = [torch.randn(REQUESTS, D, device=dev).to(torch.bfloat16) for _ in seqs]
    out = {}

    def step():
        for q, sq in zip(queries, seqs):
            out[sq["name"]] = jagged_attention(q, sq["k"], sq["v"], sq["offsets"],
                                               sq["max_len"], split=args.split)
            out[sq["name"] + "_ref"] = torch_jagged_attention(q, sq["k"], sq["v"],
                                                              sq["row_ids"])

    def check():
        for q, sq in zip(queries, seqs):
            got, ref = out[sq["name"]], out[sq["name"] + "_ref"]
            empty = torch.from_numpy(sq["lengths"] == 0).to(dev)
            if not torch.isfinite(got).all():
                raise AssertionError(f"{sq['name']}: non-finite pooled features")
            if bool((got[empty] != 0).any()):
                raise AssertionError(f"{sq['name']}: users without history must pool to 0")
            ref = torch.where(empty[:, None], torch.zeros_like(ref), ref)
            err = float((got - ref).abs().max())
            if not err < 1e-3:
                raise AssertionError(f"{sq['name']}: Triton and scatter results differ by {err}")
            # the longest history once more in float64 on the host
            r = int(np.argmax(sq["lengths"]))
            a, b = int(sq["offsets"][r]), int(sq["offsets"][r + 1])
            kh = sq["k"][a:b].double().cpu().numpy()
            vh = sq["v"][a:b].double().cpu().numpy()
            s = kh @ q[r].double().cpu().numpy() / math.sqrt(D)
            w = np.exp(s - s.max())
            want = (w / w.sum()) @ vh
            err = np.abs(got[r].double().cpu().numpy() - want).max()
            if not err < 1e-4:
                raise AssertionError(f"{sq['name']}: longest history differs by {err:.3g}")

    run(step, name="triton_jagged_attention", backend="torch", args=args,
        variant="split" if args.split else "baseline", check=check)


if __name__ == "__main__":
    main()
