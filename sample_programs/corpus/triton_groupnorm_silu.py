"""Fused GroupNorm + SiLU with a user Triton kernel over the norm layers of a VAE decoder, bf16.

The 30 GroupNorm layers (32 groups, eps 1e-6, learned per-channel scale and shift), each
followed by SiLU, of the Stable Diffusion VAE decoder decoding one 64 x 64 latent to a
512 x 512 image (batch 1, as an image-generation service decodes), applied to bf16 NCHW
activations of the decoder's shapes: the mid block and first up block at 512 x 64 x 64
(11 layers), the second up block at 512 x 128 x 128 (6), the third at 512 and 256 x 256 x 256
(1 + 5), the last at 256 and 128 x 512 x 512 (1 + 5) and the output norm at 128 x 512 x 512.
Each layer has its own input (per-channel offsets and scales, as real activations have),
weight, bias and output, 1.8 GB in all.

The Triton kernel is written the way a GroupNorm kernel is usually first written: one program
per (sample, group), which loops over the group's contiguous C/32 x H x W elements twice
(sums and sums of squares in float32 with BLOCK = 4096, then normalise, scale, shift and
SiLU, bf16 out). With batch 1 that is 32 programs per launch, each walking up to 2M elements
(4 MB). The reference is ``F.silu(F.group_norm(x.float(), 32, w, b, 1e-6))``.

``--split-groups`` cuts every group into chunks of 16384 elements and launches two kernels:
one program per (group, chunk) writes the chunk's float32 sum and sum of squares, then one
program per (group, chunk) combines its group's partial sums and normalises its chunk
(128 to 4096 programs per launch).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

GROUPS, EPS = 32, 1e-6
BLOCK = 4096
CHUNK = 16384
# (channels, height = width, number of layers) in the order the decoder runs them
LAYERS = ((512, 64, 11), (512, 128, 6), (512, 256, 1), (256, 256, 5), (256, 512, 1),
          (128, 512, 6))


@triton.jit
def groupnorm_silu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, HW, group_size, ch_per_group, eps,
                          BLOCK: tl.constexpr):
    pid = tl.program_id(0)                    # sample * GROUPS + group
    base = pid.to(tl.int64) * group_size
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, group_size, BLOCK):
        idx = start + offs
        m = idx < group_size
        x = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32)
        acc += x
        acc2 += x * x
    mean = tl.sum(acc, axis=0) / group_size
    var = tl.maximum(tl.sum(acc2, axis=0) / group_size - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    ch0 = (pid % 32) * ch_per_group
    for start in range(0, group_size, BLOCK):
        idx = start + offs
        m = idx < group_size
        x = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32)
        ch = ch0 + idx // HW
        w = tl.load(w_ptr + ch, mask=m, other=1.0).to(tl.float32)
        b = tl.load(b_ptr + ch, mask=m, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        y = y * tl.sigmoid(y)
        tl.store(y_ptr + base + idx, y.to(tl.bfloat16), mask=m)


@triton.jit
def groupnorm_partial_kernel(x_ptr, part_ptr, group_size, n_chunks, CHUNK: tl.constexpr,
                             BLOCK: tl.constexpr):
    grp = tl.program_id(0)
    chunk = tl.program_id(1)
    base = grp.to(tl.int64) * group_size + chunk * CHUNK
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, CHUNK, BLOCK):
        idx = chunk * CHUNK + start + offs
        m = idx < group_size
        x = tl.load(x_ptr + base + start + offs, mask=m, other=0.0).to(tl.float32)
        acc += x
        acc2 += x * x
    p = (grp * n_chunks + chunk) * 2
    tl.store(part_ptr + p, tl.sum(acc, axis=0))
    tl.store(part_ptr + p + 1, tl.sum(acc2, axis=0))


@triton.jit
def groupnorm_apply_kernel(x_ptr, part_ptr, w_ptr, b_ptr, y_ptr, HW, group_size,
                           ch_per_group, n_chunks, eps, CHUNK: tl.constexpr,
                           BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr):
    grp = tl.program_id(0)
    chunk = tl.program_id(1)
    c = tl.arange(0, CHUNKS_P2)
    cm = c < n_chunks
    s = tl.sum(tl.load(part_ptr + (grp * n_chunks + c) * 2, mask=cm, other=0.0), axis=0)
    s2 = tl.sum(tl.load(part_ptr + (grp * n_chunks + c) * 2 + 1, mask=cm, other=0.0), axis=0)
    mean = s / group_size
    var = tl.maximum(s2 / group_size - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    ch0 = (grp % 32) * ch_per_group
    base = grp.to(tl.int64) * group_size
    offs = tl.arange(0, BLOCK)
    for start in range(0, CHUNK, BLOCK):
        idx = chunk * CHUNK + start + offs
        m = idx < group_size
        x = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32)
        ch = ch0 + idx // HW
        w = tl.load(w_ptr + ch, mask=m, other=1.0).to(tl.float32)
        b = tl.load(b_ptr + ch, mask=m, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        y = y * tl.sigmoid(y)
        tl.store(y_ptr + base + idx, y.to(tl.bfloat16), mask=m)


def groupnorm_silu(x, weight, bias, out, split=False):
    n, c, h, w = x.shape
    hw = h * w
    cpg = c // GROUPS
    gsize = cpg * hw
    if not split:
        groupnorm_silu_kernel[(n * GROUPS,)](x, weight, bias, out, hw, gsize, cpg, EPS,
                                             BLOCK=BLOCK, num_warps=8)
        return out
    n_chunks = triton.cdiv(gsize, CHUNK)
    part = torch.empty((n * GROUPS, n_chunks, 2), device=x.device, dtype=torch.float32)
    groupnorm_partial_kernel[(n * GROUPS, n_chunks)](x, part, gsize, n_chunks, CHUNK=CHUNK,
                                                     BLOCK=BLOCK, num_warps=8)
    groupnorm_apply_kernel[(n * GROUPS, n_chunks)](
        x, part, weight, bias, out, hw, gsize, cpg, n_chunks, EPS, CHUNK=CHUNK, BLOCK=BLOCK,
        CHUNKS_P2=triton.next_power_of_2(n_chunks), num_warps=8)
    return out


def main():
    p = parser(__doc__)
    p.add_argument("--split-groups", action="store_true",
                   help="partial sums per chunk, then normalise: two launches per layer")
    args = p.parse_args()
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    layers = []
    for ch, size, count in LAYERS:
        for _ in range(count):
            shift = torch.randn(1, ch, 1, 1, device=dev, generator=gen) * 0.5
            scale = torch.rand(1, ch, 1, 1, device=dev, generator=gen) * 2.0 + 0.25
            x = (torch.randn(1, ch, size, size, device=dev, generator=gen) * scale
                 + shift).to(torch.bfloat16)
            w = (1.0 + 0.2 * torch.randn(ch, device=dev, generator=gen)).to(torch.bfloat16)
            b = (0.1 * torch.randn(ch, device=dev, generator=gen)).to(torch.bfloat16)
            layers.append((x, w, b, torch.empty_like(x)))

    def step():
        for x, w, b, y in layers:
            groupnorm_silu(x, w, b, y, split=args.split_groups)

    def check():
        for k in (0, 11, 17, 18, 23, 24, 29):
            x, w, b, y = layers[k]
            want = F.silu(F.group_norm(x.float(), GROUPS, w.float(), b.float(), EPS))
            err = (y.float() - want).abs().max().item()
            scale = want.abs().max().item()
            if not err < 0.02 * max(1.0, scale):
                raise AssertionError(f"layer {k} {tuple(x.shape)}: max error {err:.3g} "
                                     f"(max |y| {scale:.3g})")

    run(step, name="triton_groupnorm_silu", backend="torch", args=args,
        variant="split_groups" if args.split_groups else "baseline", check=check)


if __name__ == "__main__":
    main()
