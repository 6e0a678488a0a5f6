"""Rotary embedding, QKV split and paged KV-cache write for a chunked prefill, in Triton.

The step between the fused QKV projection and attention in an LLM serving engine (vLLM
style), for a Llama-3-8B-shaped model (32 query heads, 8 KV heads of 128, rope theta 5e5,
NeoX rotate-half layout): a prefill batch of 8 requests, 16384 new tokens in all (chunks of
512 to 4096 tokens, each request with 0-4000 tokens of context already in the cache), bf16.
For each token the kernel reads its row of the fused projection output ([16384, 6144] bf16,
201 MB per layer), applies the rotation for the token's absolute position (cos and sin from
a [8192, 128] float32 cache, cos in the first half of each row, sin in the second) to the 32
query heads and the 8 key heads, writes the queries to a [16384, 32, 128] buffer for the
attention kernel, and writes keys and values into the layer's paged cache
([num_blocks, 16, 8, 128] bf16 each) at the slot the token's request and position map to
(``slot_mapping``, the requests' blocks scattered through the cache). One launch per layer,
8 layers a step (each layer its own projection output and cache), 3.2 GB moved a step.

The kernel is written one program per (token, head): a grid of 16384 x 48, each program
loading the two 64-element halves of one head (256 bytes), the token's cos and sin, and
storing one head, with Triton's default 4 warps. ``--token-programs`` launches one program
per token that handles all 48 heads of its row as [32, 64], [8, 64] and [8, 128] tiles
(cos and sin loaded once per token, 12 KB in and out per program, 16384 programs).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DEV, parser, run  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

NUM_Q, NUM_KV, HEAD_DIM = 32, 8, 128
ROPE_THETA, MAX_POS = 500000.0, 8192
BLOCK_SIZE = 16                          # tokens per KV-cache block
LAYERS = 8
# (new tokens, tokens already cached) per request of the prefill batch
REQUESTS = ((4096, 0), (512, 3584), (2048, 1024), (1536, 0), (3072, 4000), (1024, 2048),
            (2560, 512), (1536, 2500))


@triton.jit
def rope_qkv_head_kernel(qkv_ptr, pos_ptr, slot_ptr, cos_sin_ptr, q_ptr, k_cache_ptr,
                         v_cache_ptr, qkv_stride, NUM_Q: tl.constexpr, NUM_KV: tl.constexpr,
                         HEAD_DIM: tl.constexpr):
    tok = tl.program_id(0)
    head = tl.program_id(1)
    HALF: tl.constexpr = HEAD_DIM // 2
    d = tl.arange(0, HALF)
    row = qkv_ptr + tok.to(tl.int64) * qkv_stride + head * HEAD_DIM
    x1 = tl.load(row + d)
    x2 = tl.load(row + HALF + d)
    if head < NUM_Q + NUM_KV:
        pos = tl.load(pos_ptr + tok)
        cos = tl.load(cos_sin_ptr + pos * HEAD_DIM + d)
        sin = tl.load(cos_sin_ptr + pos * HEAD_DIM + HALF + d)
        a = x1.to(tl.float32)
        b = x2.to(tl.float32)
        y1 = (a * cos - b * sin).to(x1.dtype)
        y2 = (b * cos + a * sin).to(x1.dtype)
        if head < NUM_Q:
            out = q_ptr + (tok.to(tl.int64) * NUM_Q + head) * HEAD_DIM
        else:
            slot = tl.load(slot_ptr + tok)
            out = k_cache_ptr + (slot * NUM_KV + head - NUM_Q) * HEAD_DIM
        tl.store(out + d, y1)
        tl.store(out + HALF + d, y2)
    else:
        slot = tl.load(slot_ptr + tok)
        out = v_cache_ptr + (slot * NUM_KV + head - NUM_Q - NUM_KV) * HEAD_DIM
        tl.store(out + d, x1)
        tl.store(out + HALF + d, x2)


@triton.jit
def rope_qkv_token_kernel(qkv_ptr, pos_ptr, slot_ptr, cos_sin_ptr, q_ptr, k_cache_ptr,
                          v_cache_ptr, qkv_stride, NUM_Q: tl.constexpr, NUM_KV: tl.constexpr,
                          HEAD_DIM: tl.constexpr):
    tok = tl.program_id(0)
    HALF: tl.constexpr = HEAD_DIM // 2
    d = tl.arange(0, HALF)
    row = qkv_ptr + tok.to(tl.int64) * qkv_stride
    pos = tl.load(pos_ptr + tok)
    slot = tl.load(slot_ptr + tok)
    cos = tl.load(cos_sin_ptr + pos * HEAD_DIM + d)[None, :]
    sin = tl.load(cos_sin_ptr + pos * HEAD_DIM + HALF + d)[None, :]

    hq = tl.arange(0, NUM_Q)[:, None] * HEAD_DIM + d[None, :]
    a = tl.load(row + hq).to(tl.float32)
    b = tl.load(row + hq + HALF).to(tl.float32)
    q_out = q_ptr + tok.to(tl.int64) * (NUM_Q * HEAD_DIM)
    tl.store(q_out + hq, (a * cos - b * sin).to(q_ptr.dtype.element_ty))
    tl.store(q_out + hq + HALF, (b * cos + a * sin).to(q_ptr.dtype.element_ty))

    hk = tl.arange(0, NUM_KV)[:, None] * HEAD_DIM + d[None, :]
    a = tl.load(row + NUM_Q * HEAD_DIM + hk).to(tl.float32)
    b = tl.load(row + NUM_Q * HEAD_DIM + hk + HALF).to(tl.float32)
    k_out = k_cache_ptr + slot * (NUM_KV * HEAD_DIM)
    tl.store(k_out + hk, (a * cos - b * sin).to(k_cache_ptr.dtype.element_ty))
    tl.store(k_out + hk + HALF, (b * cos + a * sin).to(k_cache_ptr.dtype.element_ty))

    hv = tl.arange(0, NUM_KV)[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    v = tl.load(row + (NUM_Q + NUM_KV) * HEAD_DIM + hv)
    tl.store(v_cache_ptr + slot * (NUM_KV * HEAD_DIM) + hv, v)


def rope_qkv_cache(qkv, positions, slots, cos_sin, q, k_cache, v_cache, per_token=False):
    n_tok = qkv.shape[0]
    if per_token:
        rope_qkv_token_kernel[(n_tok,)](qkv, positions, slots, cos_sin, q, k_cache, v_cache,
                                        qkv.stride(0), NUM_Q=NUM_Q, NUM_KV=NUM_KV,
                                        HEAD_DIM=HEAD_DIM)
    else:
        rope_qkv_head_kernel[(n_tok, NUM_Q + 2 * NUM_KV)](
            qkv, positions, slots, cos_sin, q, k_cache, v_cache, qkv.stride(0), NUM_Q=NUM_Q,
            NUM_KV=NUM_KV, HEAD_DIM=HEAD_DIM)


def cos_sin_cache(dev):
    inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64)
                                    / HEAD_DIM)
    ang = torch.arange(MAX_POS, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([ang.cos(), ang.sin()], 1).to(torch.float32).to(dev)


def batch_layout(gen):
    """Positions and slot mapping of the batch's tokens, and the number of cache blocks."""
    blocks_per_req = [-(-(new + ctx) // BLOCK_SIZE) for new, ctx in REQUESTS]
    n_blocks = sum(blocks_per_req) + 64
    free = torch.randperm(n_blocks, generator=gen)              # blocks scattered in the pool
    positions, slots, b0 = [], [], 0
    for (new, ctx), nb in zip(REQUESTS, blocks_per_req):
        table = free[b0:b0 + nb]
        b0 += nb
        pos = torch.arange(ctx, ctx + new)
        positions.append(pos)
        slots.append(table[pos // BLOCK_SIZE] * BLOCK_SIZE + pos % BLOCK_SIZE)
    return torch.cat(positions).to(torch.int32), torch.cat(slots).to(torch.int64), n_blocks


def reference(qkv, positions, cos_sin):
    """float32 rotate-half RoPE of q and k, and v, as [T, H, D] tensors."""
    t = qkv.shape[0]
    x = qkv.float().view(t, NUM_Q + 2 * NUM_KV, HEAD_DIM)
    cs = cos_sin[positions.long()]
    cos = cs[:, None, :HEAD_DIM // 2]
    sin = cs[:, None, HEAD_DIM // 2:]
    qk = x[:, :NUM_Q + NUM_KV]
    a, b = qk[..., :HEAD_DIM // 2], qk[..., HEAD_DIM // 2:]
    rot = torch.cat([a * cos - b * sin, b * cos + a * sin], -1).to(qkv.dtype)
    return rot[:, :NUM_Q], rot[:, NUM_Q:], qkv.view(t, -1, HEAD_DIM)[:, NUM_Q + NUM_KV:]


def main():
    p = parser(__doc__)
    p.add_argument("--token-programs", action="store_true",
                   help="one program per token handling all of its heads")
    args = p.parse_args()
    dev = DEV
    gen = torch.Generator().manual_seed(0)
    positions, slots, n_blocks = batch_layout(gen)
    positions, slots = positions.to(dev), slots.to(dev)
    n_tok = positions.numel()
    cos_sin = cos_sin_cache(dev)
    width = (NUM_Q + 2 * NUM_KV) * HEAD_DIM
    dgen = torch.Generator(device=dev).manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        qkv = (torch.randn(n_tok, width, device=dev, generator=dgen) * 2.0).to(torch.bfloat16)
        k_cache = torch.zeros(n_blocks, BLOCK_SIZE, NUM_KV, HEAD_DIM, device=dev,
                              dtype=torch.bfloat16)
        v_cache = torch.zeros_like(k_cache)
        q = torch.empty(n_tok, NUM_Q, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        layers.append((qkv, q, k_cache, v_cache))

    def step():
        for qkv, q, k_cache, v_cache in layers:
            rope_qkv_cache(qkv, positions, slots, cos_sin, q, k_cache, v_cache,
                           per_token=args.token_programs)

    def check():
        for layer in (0, LAYERS - 1):
            qkv, q, k_cache, v_cache = layers[layer]
            want_q, want_k, want_v = reference(qkv, positions, cos_sin)
            got_k = k_cache.view(-1, NUM_KV, HEAD_DIM)[slots]
            got_v = v_cache.view(-1, NUM_KV, HEAD_DIM)[slots]
            for name, got, want in (("q", q, want_q), ("k", got_k, want_k)):
                diff = (got.float() - want.float()).abs()
                # both round a float32 result to bf16: at most one bf16 ulp apart
                tol = want.float().abs() * 2.0 ** -7 + 1e-6
                if not (diff <= tol).all():
                    raise AssertionError(f"layer {layer} {name}: max error "
                                         f"{diff.max().item():.3g}")
                if not (diff == 0).float().mean().item() > 0.99:
                    raise AssertionError(f"layer {layer} {name}: too many values differ")
            if not torch.equal(got_v, want_v):
                raise AssertionError(f"layer {layer}: values not copied into the cache")
            used = torch.zeros(n_blocks * BLOCK_SIZE, dtype=torch.bool, device=dev)
            used[slots] = True
            if k_cache.view(-1, NUM_KV * HEAD_DIM)[~used].abs().sum().item() != 0:
                raise AssertionError(f"layer {layer}: writes outside the mapped slots")

    run(step, name="triton_rope_kv_cache", backend="torch", args=args,
        variant="token_programs" if args.token_programs else "baseline", check=check)


if __name__ == "__main__":
    main()
