"""Post-training int8 fake quantisation of an fp16 MLP, written in eager PyTorch.

A 4-layer MLP of width 4096 (``nn.Linear(4096, 4096)`` with bias, ReLU between layers, all
fp16; Kaiming-normal weights stand in for trained ones) and one batch of 8192 fp16 input
rows. One step is what a simple post-training-quantisation script does to measure the
accuracy of int8 inference:

- a calibration pass: the fp16 model runs on the batch, recording before every layer the
  per-tensor absolute maximum of its input activations (``abs().max()``), and each
  weight's per-output-channel absolute maximum (``abs().amax(dim=1, keepdim=True)``); the
  scales are those maxima divided by 127, kept as fp16 tensors on the device;
- the fake-quantised forward on the same batch: before each matmul the activations
  (per-tensor, int8 range -128..127) and the weight (per-channel, -127..127) go through
  ``fake_quant``: divide by the scale, ``torch.round``, ``torch.clamp``, ``.to(torch.int8)``,
  back to fp16 and multiply by the scale; then ``F.linear`` in fp16 with the fp16 bias, ReLU.

The calibration pass's output (the unquantised fp16 result) is kept next to the quantised
one. ``--compile`` runs the same ``fake_quant`` function through ``torch.compile``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--compile", action="store_true", help="torch.compile the fake_quant function")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
BATCH, WIDTH, LAYERS = 8192, 4096, 4

layers = nn.ModuleList()
for _ in range(LAYERS):
    lin = nn.Linear(WIDTH, WIDTH)
    nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
    nn.init.normal_(lin.bias, std=0.02)
    layers.append(lin)
layers = layers.to(dev, torch.float16).eval()
x = torch.randn(BATCH, WIDTH, device=dev, dtype=torch.float16)


def fake_quant(t, scale, qmin, qmax):
    q = torch.clamp(torch.round(t / scale), qmin, qmax).to(torch.int8)
    return q.to(t.dtype) * scale


fq = torch.compile(fake_quant, dynamic=False) if args.compile else fake_quant


@torch.no_grad()
def calibrate(inp):
    act_scales, w_scales = [], []
    h = inp
    for i, lin in enumerate(layers):
        act_scales.append(h.abs().max() / 127.0)
        w_scales.append(lin.weight.abs().amax(dim=1, keepdim=True) / 127.0)
        h = lin(h)
        if i < LAYERS - 1:
            h = torch.relu(h)
    return act_scales, w_scales, h


@torch.no_grad()
def quantized_forward(inp, act_scales, w_scales):
    outputs = []
    h = inp
    for i, lin in enumerate(layers):
        hq = fq(h, act_scales[i], -128, 127)
        wq = fq(lin.weight, w_scales[i], -127, 127)
        h = F.linear(hq, wq, lin.bias)
        if i < LAYERS - 1:
            h = torch.relu(h)
        outputs.append(h)
    return outputs


out = {}


def step():
    act_scales, w_scales, y_ref = calibrate(x)
    outputs = quantized_forward(x, act_scales, w_scales)
    out.update(act_scales=act_scales, w_scales=w_scales, y_ref=y_ref, outputs=outputs)


def check():
    act_scales, w_scales, outputs = out["act_scales"], out["w_scales"], out["outputs"]
    if not torch.equal(act_scales[0], x.abs().max() / 127.0):
        raise AssertionError("first activation scale is not absmax / 127")
    want = layers[2].weight.float().abs().amax(dim=1, keepdim=True) / 127.0
    if not torch.allclose(w_scales[2].float(), want, rtol=1e-3, atol=0):
        raise AssertionError("per-channel weight scales of layer 3 are off")
    # each layer against a float32/float64 fake-quant reference on the step's own input
    # (first 256 rows); fp16 rounding of h / scale moves a few codes by one step
    rows = slice(0, 256)
    with torch.no_grad():
        for i, lin in enumerate(layers):
            h = (x if i == 0 else outputs[i - 1])[rows].float()
            s_a, s_w = act_scales[i].float(), w_scales[i].float()
            hq = torch.clamp(torch.round(h / s_a), -128, 127) * s_a
            wq = torch.clamp(torch.round(lin.weight.float() / s_w), -127, 127) * s_w
            ref = hq.double() @ wq.double().t() + lin.bias.double()
            if i < LAYERS - 1:
                ref = torch.relu(ref)
            err = float((outputs[i][rows].double() - ref).abs().max() / ref.abs().max())
            if not err < 2e-2:
                raise AssertionError(f"layer {i + 1}: relative error {err:.3g} "
                                     "against the float32 fake-quant reference")
    # int8 simulation should stay close to the unquantised fp16 model
    got, y_ref = outputs[-1].float(), out["y_ref"].float()
    rel = float((got - y_ref).norm() / y_ref.norm())
    if not rel < 0.1:
        raise AssertionError(f"quantised output is {rel:.3g} (relative) from the fp16 model")


run(step, name="torch_quant_eager", backend="torch", args=args,
    variant="compile" if args.compile else "baseline", check=check)
