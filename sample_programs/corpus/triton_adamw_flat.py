"""The optimizer step of mixed-precision training on flat parameter buffers, in Triton.

The local shard of a distributed optimizer (Megatron / ZeRO style) keeps float32 master
weights, Adam moments and a bf16 gradient buffer as flat contiguous buffers, one per
parameter group: 96Mi parameters with weight decay (the matrices) and 384Ki without (biases
and norm gains). One step clips the gradients to a global L2 norm of 1.0 and applies AdamW
(lr 3e-4, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1 on the first group), writing the new
master weights, both moments and the bf16 copy of the weights the next forward pass reads.
The state is that of a run resumed at step 1000.

Five launches: one partial sum-of-squares kernel per group (a fixed grid of 8 programs per
SM for the large buffer, grid-stride over 4096-element tiles, one float32 partial per
program, no atomics, so the norm is deterministic), one single-program kernel that sums the
partials and writes the clip coefficient and the norm to the device (no host read-back),
and one fused AdamW kernel per group (2048 elements per program, 8 warps; reads the bf16
gradient and the three float32 buffers once, writes three float32 buffers and the bf16
weights: 28 bytes per parameter, 2.8 GB per step). The bias corrections are host scalars
computed from the step count. This is the control: no fixed variant.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DEV, parser, run  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

N_DECAY, N_NO_DECAY = 96 * 2 ** 20, 384 * 2 ** 10
LR, BETA1, BETA2, EPS, WD, MAX_NORM = 3e-4, 0.9, 0.95, 1e-8, 0.1, 1.0
START_STEP = 1000
NORM_BLOCK, ADAM_BLOCK = 4096, 2048


@triton.jit
def sumsq_partial_kernel(g_ptr, part_ptr, n, nprog, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for it in range(0, tl.cdiv(n, nprog * BLOCK)):      # grid-stride over BLOCK tiles
        idx = (it * nprog + pid) * BLOCK + offs
        g = tl.load(g_ptr + idx, mask=idx < n, other=0.0).to(tl.float32)
        acc += g * g
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def clip_coef_kernel(part_ptr, out_ptr, n_part, max_norm, P2: tl.constexpr):
    i = tl.arange(0, P2)
    s = tl.sum(tl.load(part_ptr + i, mask=i < n_part, other=0.0), axis=0)
    norm = tl.sqrt(s)
    tl.store(out_ptr, tl.minimum(max_norm / (norm + 1e-6), 1.0))
    tl.store(out_ptr + 1, norm)


@triton.jit
def adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, w_ptr, coef_ptr, n, lr, beta1, beta2, eps,
                 weight_decay, step_size, bc2_sqrt, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    clip = tl.load(coef_ptr)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32) * clip
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    m = tl.load(m_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    p = p * (1.0 - lr * weight_decay)
    p = p - step_size * m / (tl.sqrt(v) / bc2_sqrt + eps)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(w_ptr + offs, p.to(tl.bfloat16), mask=mask)


def make_group(n, gen, dev, scale):
    """Master weights, moments and gradients of one group, as after 1000 steps."""
    p = torch.randn(n, generator=gen, device=dev) * scale
    g = (torch.randn(n, generator=gen, device=dev) * 3e-4).to(torch.bfloat16)
    m = torch.randn(n, generator=gen, device=dev) * 1e-4
    v = torch.rand(n, generator=gen, device=dev) * 2e-7 + 1e-9
    return {"p": p, "g": g, "m": m, "v": v, "w": p.to(torch.bfloat16), "n": n}


def main():
    args = parser(__doc__).parse_args()
    dev = DEV
    gen = torch.Generator(device=dev).manual_seed(0)
    groups = [dict(make_group(N_DECAY, gen, dev, 0.02), wd=WD),
              dict(make_group(N_NO_DECAY, gen, dev, 0.05), wd=0.0)]
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count if dev == "cuda" else 132
    norm_grid = [min(8 * n_sm, triton.cdiv(g["n"], NORM_BLOCK)) for g in groups]
    norm_grid[1] = min(norm_grid[1], 48)
    part = torch.empty(sum(norm_grid), device=dev, dtype=torch.float32)
    part_views = [part[:norm_grid[0]], part[norm_grid[0]:]]
    coef = torch.empty(2, device=dev, dtype=torch.float32)        # clip coefficient, norm
    state = {"step": START_STEP}

    def step():
        state["step"] += 1
        t = state["step"]
        step_size = LR / (1.0 - BETA1 ** t)
        bc2_sqrt = math.sqrt(1.0 - BETA2 ** t)
        for grp, grid, pv in zip(groups, norm_grid, part_views):
            sumsq_partial_kernel[(grid,)](grp["g"], pv, grp["n"], grid, BLOCK=NORM_BLOCK,
                                          num_warps=8)
        clip_coef_kernel[(1,)](part, coef, part.numel(), MAX_NORM,
                               P2=triton.next_power_of_2(part.numel()), num_warps=4)
        for grp in groups:
            adamw_kernel[(triton.cdiv(grp["n"], ADAM_BLOCK),)](
                grp["p"], grp["g"], grp["m"], grp["v"], grp["w"], coef, grp["n"], LR, BETA1,
                BETA2, EPS, grp["wd"], step_size, bc2_sqrt, BLOCK=ADAM_BLOCK, num_warps=8)

    def check():
        before = [{k: grp[k].clone() for k in ("p", "m", "v")} for grp in groups]
        step()
        if dev == "cuda":
            torch.cuda.synchronize()
        t = state["step"]
        g_all = torch.cat([grp["g"].float() for grp in groups])
        norm = g_all.double().norm().item()
        if not abs(coef[1].item() - norm) < 1e-5 * norm:
            raise AssertionError(f"gradient norm {coef[1].item()} vs {norm}")
        clip = min(1.0, MAX_NORM / (norm + 1e-6))
        if not (clip < 0.9 and abs(coef[0].item() - clip) < 1e-5 * clip):
            raise AssertionError(f"clip coefficient {coef[0].item()} vs {clip}")
        for grp, b in zip(groups, before):
            g = grp["g"].float() * clip
            m = BETA1 * b["m"] + (1 - BETA1) * g
            v = BETA2 * b["v"] + (1 - BETA2) * g * g
            denom = v.sqrt() / math.sqrt(1 - BETA2 ** t) + EPS
            p = b["p"] * (1 - LR * grp["wd"]) - LR / (1 - BETA1 ** t) * m / denom
            for name, got, want, atol in (("m", grp["m"], m, 1e-10), ("v", grp["v"], v, 1e-15),
                                          ("p", grp["p"], p, 1e-8)):
                bad = ((got - want).abs() > 1e-5 * want.abs() + atol).sum().item()
                if bad:
                    err = (got - want).abs().max().item()
                    raise AssertionError(f"group of {grp['n']}: {bad} values of {name} off "
                                         f"(max abs error {err:.3g})")
            moved = (grp["p"] - b["p"]).abs().mean().item()
            if not 1e-5 < moved < 1e-3:
                raise AssertionError(f"implausible mean update {moved:.3g}")
            w = grp["w"].float()
            near = ((w - grp["p"]).abs() <= grp["p"].abs() * 2.0 ** -8).all().item()
            same = (grp["w"] == grp["p"].to(torch.bfloat16)).float().mean().item()
            if not (near and same > 0.999):          # round to nearest even, as torch does
                raise AssertionError(f"bf16 weights differ from the master weights ({same})")

    run(step, name="triton_adamw_flat", backend="torch", args=args, check=check)


if __name__ == "__main__":
    main()
