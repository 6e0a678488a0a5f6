"""One training step of a CLIP-style contrastive head, in FP32 with TF32 off.

Image and text features of a batch of 4096 pairs (1024 and 768 wide, as a frozen backbone
would hand them over) go through two bias-free projections to a 512-wide embedding, are
L2-normalised, and ``logits = img @ txt.T * exp(logit_scale)``; the loss is the mean of the
cross-entropy over rows (image to text) and over columns (text to image) with the diagonal
as the target. Backward and an AdamW step follow. ``--bf16`` runs forward and loss under
``torch.autocast`` in bfloat16.
"""

import math
import os
import sys
from contextlib import nullcontext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--bf16", action="store_true", help="autocast to bfloat16")
args = p.parse_args()
torch.manual_seed(0)
torch.set_float32_matmul_precision("highest")               # no TF32
torch.backends.cudnn.allow_tf32 = False
dev = DEV
N, D_IMG, D_TXT, E = 4096, 1024, 768, 512


class ClipHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.img_proj = nn.Linear(D_IMG, E, bias=False)
        self.txt_proj = nn.Linear(D_TXT, E, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, img, txt):
        a = F.normalize(self.img_proj(img), dim=-1)
        b = F.normalize(self.txt_proj(txt), dim=-1)
        logits = a @ b.t() * self.logit_scale.exp()
        labels = torch.arange(logits.shape[0], device=logits.device)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


model = ClipHead().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
img = torch.randn(N, D_IMG, device=dev)
txt = torch.randn(N, D_TXT, device=dev)
last = {}


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev, dtype=torch.bfloat16) if args.bf16 else nullcontext():
        loss = model(img, txt)
    loss.backward()
    opt.step()
    last["loss"] = loss.detach()


def check():
    with torch.no_grad():
        a = F.normalize(img.double() @ model.img_proj.weight.double().t(), dim=-1)
        b = F.normalize(txt.double() @ model.txt_proj.weight.double().t(), dim=-1)
        logits = a @ b.t() * model.logit_scale.double().exp()
        labels = torch.arange(N, device=dev)
        ref = float(F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    got = float(last["loss"])
    # the last step's loss was computed before its optimizer update, so allow for that drift
    if not (math.isfinite(got) and abs(got - ref) < 0.05 * abs(ref) + 0.05):
        raise AssertionError(f"loss {got} vs float64 reference {ref}")
    for name, prm in model.named_parameters():
        if prm.grad is None or not torch.isfinite(prm.grad).all():
            raise AssertionError(f"bad gradient for {name}")


run(step, name="torch_clip_loss", backend="torch", args=args,
    variant="bf16" if args.bf16 else "baseline", check=check)
