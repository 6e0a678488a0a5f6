"""Post-processing of a RetinaNet-style one-stage detector for a batch of images, in PyTorch.

Batch of 16 images of 768 x 768, three FPN levels (strides 8, 16 and 32: 96^2, 48^2 and 24^2
positions) with 9 anchors per position (3 scales x 3 aspect ratios), 108864 anchors per
image, 80 classes. The head's outputs arrive in fp16, as it ran under autocast: class logits
[16, anchors_of_level, 80] and box deltas [16, anchors_of_level, 4] per level; the anchors
are float32 [anchors_of_level, 4] boxes built once.

One step, batched over the images:

- per level: sigmoid of the class logits, flattened over (anchor, class), ``topk`` of 1000
  per image, the anchor index and the class recovered from the flat index (``//`` and
  ``%``), the deltas gathered and the anchors indexed for those candidates;
- the three levels concatenated (3000 candidates per image), scores and deltas in float32;
- box decoding in the (dx, dy, dw, dh) parameterisation (centre shift times the anchor size,
  ``exp`` of the clamped log-size deltas), clipped to the image;
- class-aware non-maximum suppression without torchvision: candidates sorted by score,
  each image's boxes shifted by class times (image size + 1) so that classes never overlap,
  the full pairwise IoU matrix [16, 3000, 3000] computed with broadcasting, its strict upper
  triangle, and a candidate kept when its largest IoU with any higher-scoring candidate is
  at most 0.5 and its score above 0.05 (Fast NMS);
- the 100 best survivors per image (``topk`` of the masked scores) with boxes and labels.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import DEV, parser, run  # noqa: E402

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
N, IMG, NUM_CLASSES, A = 16, 768, 80, 9
STRIDES, SIZES = (8, 16, 32), (32, 64, 128)
TOPK_PER_LEVEL, MAX_DET, IOU_THR, SCORE_THR = 1000, 100, 0.5, 0.05
BBOX_CLIP = math.log(1000.0 / 16)
OBJECTS_PER_LEVEL = 8


def make_anchors(stride, size):
    scales = size * 2.0 ** (torch.arange(3) / 3)
    ratios = torch.tensor([0.5, 1.0, 2.0])
    h_ratios = ratios.sqrt()
    w_ratios = 1.0 / h_ratios
    ws = (w_ratios[:, None] * scales[None, :]).reshape(-1)
    hs = (h_ratios[:, None] * scales[None, :]).reshape(-1)
    base = torch.stack([-ws, -hs, ws, hs], dim=1) / 2                   # [A, 4]
    side = IMG // stride
    centres = (torch.arange(side, dtype=torch.float32) + 0.5) * stride
    cy, cx = torch.meshgrid(centres, centres, indexing="ij")
    shifts = torch.stack([cx, cy, cx, cy], dim=-1).reshape(-1, 1, 4)
    return (shifts + base).reshape(-1, 4).to(dev)                      # [side*side*A, 4]


anchors_per_level = [make_anchors(s, z) for s, z in zip(STRIDES, SIZES)]

# --- head outputs: background-level logits plus a few objects per level and image ---
gen = torch.Generator().manual_seed(0)
cls_logits, box_deltas = [], []
for stride in STRIDES:
    side = IMG // stride
    n_anchors = side * side * A
    logits = torch.randn(N, n_anchors, NUM_CLASSES, device=dev, dtype=torch.float16)
    logits = logits.sub_(4.5)
    n_obj = N * OBJECTS_PER_LEVEL
    img = torch.arange(N).repeat_interleave(OBJECTS_PER_LEVEL)
    ys = torch.randint(1, side - 1, (n_obj,), generator=gen)
    xs = torch.randint(1, side - 1, (n_obj,), generator=gen)
    cls = torch.randint(0, NUM_CLASSES, (n_obj,), generator=gen)
    off = torch.tensor([-1, 0, 1])
    cells = ((ys[:, None, None] + off[None, :, None]) * side
             + (xs[:, None, None] + off[None, None, :])).reshape(n_obj, 9)
    aidx = (cells[:, :, None] * A + torch.arange(A)).reshape(n_obj, -1)   # [n_obj, 81]
    boost = 4.0 + 3.0 * torch.rand(aidx.shape, generator=gen)
    logits.index_put_((img[:, None].expand_as(aidx).reshape(-1).to(dev),
                       aidx.reshape(-1).to(dev),
                       cls[:, None].expand_as(aidx).reshape(-1).to(dev)),
                      boost.reshape(-1).to(dev, torch.float16), accumulate=True)
    cls_logits.append(logits)
    box_deltas.append((0.2 * torch.randn(N, n_anchors, 4, device=dev)).half())
STDS = torch.tensor([1.0, 1.0, 1.0, 1.0], device=dev)
MEANS = torch.zeros(4, device=dev)
out = {}


def decode(deltas, anchors):
    """(dx, dy, dw, dh) deltas relative to anchors -> (x1, y1, x2, y2), clipped to the image."""
    deltas = deltas * STDS + MEANS
    pxy = (anchors[..., :2] + anchors[..., 2:]) * 0.5
    pwh = anchors[..., 2:] - anchors[..., :2]
    dxy, dwh = deltas[..., :2], deltas[..., 2:]
    dwh = dwh.clamp(min=-BBOX_CLIP, max=BBOX_CLIP)
    gxy = pxy + pwh * dxy
    gwh = pwh * dwh.exp()
    boxes = torch.cat([gxy - gwh * 0.5, gxy + gwh * 0.5], dim=-1)
    boxes[..., 0::2].clamp_(min=0, max=IMG)
    boxes[..., 1::2].clamp_(min=0, max=IMG)
    return boxes


def box_iou(b):
    """Pairwise IoU of the boxes of each image: [N, M, 4] -> [N, M, M]."""
    area = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    lt = torch.max(b[:, :, None, :2], b[:, None, :, :2])
    rb = torch.min(b[:, :, None, 2:], b[:, None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area[:, :, None] + area[:, None, :] - inter
    return inter / union


def batched_fast_nms(boxes, scores, labels):
    scores_s, order = scores.sort(dim=1, descending=True)
    boxes_s = boxes.gather(1, order[..., None].expand(-1, -1, 4))
    labels_s = labels.gather(1, order)
    shifted = boxes_s + labels_s[..., None] * (IMG + 1.0)
    iou = box_iou(shifted).triu(diagonal=1)
    max_iou = iou.max(dim=1).values
    keep = (max_iou <= IOU_THR) & (scores_s > SCORE_THR)
    return boxes_s, scores_s, labels_s, keep


@torch.no_grad()
def postprocess(cls_logits, box_deltas):
    cand_scores, cand_labels, cand_deltas, cand_anchors = [], [], [], []
    for lvl in range(len(STRIDES)):
        scores = cls_logits[lvl].sigmoid().flatten(1)                  # [N, anchors*classes]
        top_scores, top_idx = scores.topk(TOPK_PER_LEVEL, dim=1)
        anchor_idx = top_idx // NUM_CLASSES
        labels = top_idx % NUM_CLASSES
        deltas = box_deltas[lvl].gather(1, anchor_idx[..., None].expand(-1, -1, 4))
        cand_scores.append(top_scores)
        cand_labels.append(labels)
        cand_deltas.append(deltas)
        cand_anchors.append(anchors_per_level[lvl][anchor_idx])
        if lvl == 0:
            out["lvl0_top"] = top_scores
    scores = torch.cat(cand_scores, dim=1).float()
    labels = torch.cat(cand_labels, dim=1)
    deltas = torch.cat(cand_deltas, dim=1).float()
    anchors = torch.cat(cand_anchors, dim=1)
    boxes = decode(deltas, anchors)
    out["cand"] = (scores, labels, deltas, anchors, boxes)

    boxes_s, scores_s, labels_s, keep = batched_fast_nms(boxes, scores, labels)
    masked = torch.where(keep, scores_s, -1.0)
    det_scores, det_idx = masked.topk(MAX_DET, dim=1)
    det_boxes = boxes_s.gather(1, det_idx[..., None].expand(-1, -1, 4))
    det_labels = labels_s.gather(1, det_idx)
    return det_boxes, det_scores, det_labels, det_scores > 0


def step():
    out["det"] = postprocess(cls_logits, box_deltas)


def np_iou(a, b):
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-12)


def check():
    # top-k of level 0, image 0, against NumPy (values only: fp16 scores have ties)
    x = cls_logits[0][0].float().cpu().numpy().ravel()
    ref = np.sort((1.0 / (1.0 + np.exp(-x))).astype(np.float16).astype(np.float32))[::-1]
    got = out["lvl0_top"][0].float().cpu().numpy()
    if not np.allclose(got, ref[:TOPK_PER_LEVEL], atol=1e-3):
        raise AssertionError("level-0 top-k scores differ from NumPy")
    # decoding of image 0's candidates
    scores, labels, deltas, anchors, boxes = (t[0].double().cpu().numpy() for t in out["cand"])
    pxy = (anchors[:, :2] + anchors[:, 2:]) / 2
    pwh = anchors[:, 2:] - anchors[:, :2]
    gxy = pxy + pwh * deltas[:, :2]
    gwh = pwh * np.exp(np.clip(deltas[:, 2:], -BBOX_CLIP, BBOX_CLIP))
    ref_boxes = np.clip(np.concatenate([gxy - gwh / 2, gxy + gwh / 2], 1), 0, IMG)
    err = np.abs(boxes - ref_boxes).max()
    if not err < 1e-2:
        raise AssertionError(f"decoded boxes: max error {err:.3g} px")
    # NMS properties on image 0: every kept detection overlaps no candidate of its class
    # with a strictly higher score by more than the threshold
    det_boxes, det_scores, det_labels, det_valid = (t[0].cpu().numpy() for t in out["det"])
    if not np.all(np.diff(det_scores) <= 0):
        raise AssertionError("detections not sorted by score")
    v = det_valid.astype(bool)
    if v.sum() < 20:
        raise AssertionError(f"only {v.sum()} detections in image 0")
    db, ds, dl = det_boxes[v].astype(np.float64), det_scores[v], det_labels[v]
    if np.any(db < 0) or np.any(db > IMG) or np.any(db[:, 2:] < db[:, :2]):
        raise AssertionError("detection boxes outside the image or inverted")
    iou = np_iou(db, boxes)
    conflict = (iou > IOU_THR + 1e-3) & (labels[None, :] == dl[:, None]) \
        & (scores[None, :] > ds[:, None] + 1e-6)
    if conflict.any():
        raise AssertionError(f"{int(conflict.sum())} kept boxes overlap a better one")
    if not np.all(ds > SCORE_THR):
        raise AssertionError("kept detection under the score threshold")


run(step, name="torch_detection_post", backend="torch", args=args, check=check)
