"""A mixture-of-experts feed-forward layer in bf16 with user Triton GEMM kernels per expert.

8192 tokens of width 2048 are routed to 2 of 16 SwiGLU experts (hidden 1408, the size of
DeepSeek-MoE-16B's routed experts): a router ``Linear`` in bf16, softmax in float32,
``topk``, renormalised weights; the 16384 (token, expert) pairs are sorted by expert
(stable ``argsort``), counted with ``bincount`` and the token rows gathered in that order.
The router has a per-expert bias, so the load is uneven (the busiest expert gets about 4x
the tokens of the quietest), as in a model that is not perfectly balanced.

The experts' weights are [16, 2048, 2816] (gate and up projections side by side) and
[16, 1408, 2048], 277 MB in all. A Triton kernel computes one expert's rows times its
gate/up weights with both accumulators in one program (64 x 128 x 64 tiles, 4 warps, 3
stages) and writes silu(gate) * up; the same kernel without the gate does the down
projection into the sorted output. The host reads the per-expert counts (``tolist()``,
a synchronisation) and launches both kernels for each expert on its slice of the sorted
rows, 32 launches. The outputs are scaled by the routing weights and summed back per
token with ``index_add_``.

``--grouped`` launches each GEMM once for all experts: a tile schedule (tiles per expert,
their cumulative sum and the experts' first rows) is computed on the device, every
program finds its expert from its tile index, programs past the last tile return, and the
counts never go to the host.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

TOKENS, D, FF, E, TOP_K = 8192, 2048, 1408, 16, 2
BLOCK_M, BLOCK_N, BLOCK_K, WARPS, STAGES = 64, 128, 64, 4, 3


@triton.jit
def expert_gemm_kernel(a_ptr, b_ptr, c_ptr, m_rows, tile_end_ptr, row_start_ptr,
                       N, K, stride_be,
                       GROUPED: tl.constexpr, SILU_GATE: tl.constexpr,
                       N_EXPERTS: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[rows, N] = A[rows, K] @ B[K, N] (or silu(A @ B_gate) * (A @ B_up) if SILU_GATE,
    with B [K, 2N]). Grouped: A and C hold every expert's rows, B is [experts, K, *]."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if GROUPED:
        ends = tl.load(tile_end_ptr + tl.arange(0, N_EXPERTS))      # inclusive tile cumsum
        if pid_m >= tl.max(ends, axis=0):
            return
        e = tl.sum((ends <= pid_m).to(tl.int32), axis=0)
        first_tile = tl.where(e > 0, tl.load(tile_end_ptr + tl.maximum(e - 1, 0)), 0)
        row_end = tl.load(row_start_ptr + e + 1)
        m0 = tl.load(row_start_ptr + e) + (pid_m - first_tile) * BLOCK_M
        b_ptr += e.to(tl.int64) * stride_be
    else:
        m0 = pid_m * BLOCK_M
        row_end = m_rows
    if SILU_GATE:
        ldb = 2 * N
    else:
        ldb = N
    offs_m = m0 + tl.arange(0, BLOCK_M)
    mask_m = offs_m < row_end
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
        acc = tl.dot(a, tl.load(b_ptrs), acc)
        if SILU_GATE:
            acc_up = tl.dot(a, tl.load(b_ptrs + N), acc_up)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * ldb
    if SILU_GATE:
        acc = acc * tl.sigmoid(acc) * acc_up
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None])


def main():
    p = parser(__doc__)
    p.add_argument("--grouped", action="store_true",
                   help="one grouped launch per GEMM over all experts")
    args = p.parse_args()
    torch.manual_seed(0)
    dev = "cuda"
    bf = torch.bfloat16
    x = torch.randn(TOKENS, D, device=dev, dtype=bf)
    w_router = (torch.randn(D, E, device=dev) / D ** 0.5).to(bf)
    router_bias = torch.linspace(-0.7, 0.7, E, device=dev)
    w_gate_up = (torch.randn(E, D, 2 * FF, device=dev) / D ** 0.5).to(bf)
    w_down = (torch.randn(E, FF, D, device=dev) / FF ** 0.5).to(bf)
    pairs = TOKENS * TOP_K
    h_buf = torch.empty(pairs, FF, device=dev, dtype=bf)
    y_buf = torch.empty(pairs, D, device=dev, dtype=bf)
    max_tiles = triton.cdiv(pairs, BLOCK_M) + E
    out = {}

    def launch(a, b, c, rows, n, k, silu, grid_m, tile_end=None, row_start=None):
        grid = (grid_m, triton.cdiv(n, BLOCK_N))
        grouped = tile_end is not None
        expert_gemm_kernel[grid](
            a, b, c, rows, tile_end if grouped else a, row_start if grouped else a,
            n, k, b.stride(0) if grouped else 0,
            GROUPED=grouped, SILU_GATE=silu, N_EXPERTS=E, BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=WARPS, num_stages=STAGES)

    def step():
        logits = (x @ w_router).float() + router_bias
        probs = torch.softmax(logits, dim=-1)
        top_w, top_e = torch.topk(probs, TOP_K, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        flat_e = top_e.reshape(-1)
        order = torch.argsort(flat_e, stable=True)
        counts = torch.bincount(flat_e, minlength=E)
        token_of = order // TOP_K
        xs = x[token_of]                                               # [pairs, D] by expert
        if args.grouped:
            tiles = (counts + BLOCK_M - 1) // BLOCK_M
            tile_end = torch.cumsum(tiles, 0).to(torch.int32)
            row_start = torch.zeros(E + 1, device=dev, dtype=torch.int32)
            row_start[1:] = torch.cumsum(counts, 0)
            launch(xs, w_gate_up, h_buf, 0, FF, D, True, max_tiles, tile_end, row_start)
            launch(h_buf, w_down, y_buf, 0, D, FF, False, max_tiles, tile_end, row_start)
        else:
            start = 0
            for e, n in enumerate(counts.tolist()):
                if n == 0:
                    continue
                rows = slice(start, start + n)
                launch(xs[rows], w_gate_up[e], h_buf[rows], n, FF, D, True,
                       triton.cdiv(n, BLOCK_M))
                launch(h_buf[rows], w_down[e], y_buf[rows], n, D, FF, False,
                       triton.cdiv(n, BLOCK_M))
                start += n
        weights = top_w.reshape(-1)[order]
        y = torch.zeros(TOKENS, D, device=dev, dtype=torch.float32)
        y.index_add_(0, token_of, y_buf.float() * weights[:, None])
        out.update(y=y, counts=counts, order=order, top_e=top_e, top_w=top_w)

    def check():
        counts = out["counts"].cpu()
        if int(counts.sum()) != pairs or int(counts.max()) < 1.5 * int(counts.min()):
            raise AssertionError(f"unexpected routing counts {counts.tolist()}")
        # 512 tokens through their two experts in float32
        tok = torch.randperm(TOKENS, device=dev)[:512]
        xf = x[tok].float()
        want = torch.zeros(512, D, device=dev)
        for e in range(E):
            for j in range(TOP_K):
                sel = (out["top_e"][tok, j] == e).nonzero()[:, 0]
                if sel.numel() == 0:
                    continue
                hu = xf[sel] @ w_gate_up[e].float()
                h = torch.nn.functional.silu(hu[:, :FF]) * hu[:, FF:]
                y = h.to(torch.bfloat16).float() @ w_down[e].float()
                want[sel] += out["top_w"][tok[sel], j, None] * y
        got = out["y"][tok]
        err = ((got - want).norm() / want.norm()).item()
        if not err < 2e-2:
            raise AssertionError(f"MoE output differs from float32 by {err:.3g}")
        srt = out["top_e"].reshape(-1)[out["order"]]
        if not (srt[1:] >= srt[:-1]).all():
            raise AssertionError("pairs not sorted by expert")

    run(step, name="triton_moe_grouped", backend="torch", args=args,
        variant="grouped" if args.grouped else "baseline", check=check)


if __name__ == "__main__":
    main()
