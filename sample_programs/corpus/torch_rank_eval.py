"""Offline ranking evaluation of a matrix-factorisation recommender, in FP32 PyTorch.

The evaluation loop of a retrieval model: for one batch of 2048 test users, scores against
the whole catalogue of 20000 items are the dot products of 128-wide float32 user and item
factors plus an item bias (one ``addmm``, PyTorch's default precision: TF32 off). Items the
user interacted with in training (about 50 per user, 100K pairs) are excluded by setting
their scores to -inf with ``index_put_``. The catalogue is then ranked per user the way
many evaluation scripts do it, ``scores.argsort(dim=1, descending=True)[:, :100]``, and
from the top 100 the usual metrics are computed against each user's held-out items (1 to
10 of them, a dense boolean [users, items] mask): hit indicators by ``gather``, NDCG@k with
log2 discounts and an ideal-DCG lookup table, Recall@k for k in 10, 20, 50, 100, and the
mean reciprocal rank of the first hit, each averaged over the batch.

``--topk`` takes the 100 best items with ``torch.topk(scores, 100, dim=1)`` (sorted)
instead of sorting all 20000 scores of every user.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--topk", action="store_true", help="torch.topk instead of a full argsort")
args = p.parse_args()
dev = DEV
USERS, ITEMS, DIM, TOP = 2048, 20000, 128, 100
KS = (10, 20, 50, 100)
SEEN, MAX_TEST = 50, 10


def make_data(gen):
    """Factors with some structure, training interactions and held-out items (host, NumPy)."""
    topics = gen.standard_normal((32, DIM)).astype(np.float32)
    item_topic = gen.integers(0, 32, ITEMS)
    item_f = (topics[item_topic] + 0.7 * gen.standard_normal((ITEMS, DIM))).astype(np.float32)
    item_f /= np.sqrt(DIM)
    pop = gen.zipf(1.3, ITEMS).clip(1, 10000).astype(np.float32)
    item_b = (0.3 * np.log(pop)).astype(np.float32)
    user_f = (gen.standard_normal((USERS, 32)) @ topics * 0.25
              + 0.5 * gen.standard_normal((USERS, DIM))).astype(np.float32)
    # "true" preferences: the model's score plus noise; the user's favourites split into
    # training interactions (masked at evaluation) and held-out test items
    true = user_f @ item_f.T + item_b + 0.8 * gen.standard_normal((USERS, ITEMS)).astype(np.float32)
    n_test = gen.integers(1, MAX_TEST + 1, USERS)
    fav = np.argsort(-true, axis=1)[:, :200]
    seen_r, seen_c, test = [], [], np.zeros((USERS, ITEMS), dtype=bool)
    for u in range(USERS):
        pick = gen.permutation(200)
        seen = fav[u, pick[:SEEN]]
        held = fav[u, pick[SEEN:SEEN + n_test[u]]]
        seen_r.append(np.full(SEEN, u))
        seen_c.append(seen)
        test[u, held] = True
    return (user_f, item_f, item_b, np.concatenate(seen_r), np.concatenate(seen_c), test,
            n_test)


user_f_h, item_f_h, item_b_h, seen_r_h, seen_c_h, test_h, n_test_h = make_data(
    np.random.default_rng(0))
user_f = torch.from_numpy(user_f_h).to(dev)
item_f = torch.from_numpy(item_f_h).to(dev)
item_b = torch.from_numpy(item_b_h).to(dev)
seen_r = torch.from_numpy(seen_r_h).to(dev)
seen_c = torch.from_numpy(seen_c_h).to(dev)
test_mask = torch.from_numpy(test_h).to(dev)
n_test = torch.from_numpy(n_test_h).to(dev)
discount = 1.0 / torch.log2(torch.arange(2, TOP + 2, device=dev, dtype=torch.float32))
idcg = torch.cat([torch.zeros(1, device=dev), torch.cumsum(discount, 0)])   # idcg[n]
ranks = torch.arange(1, TOP + 1, device=dev, dtype=torch.float32)
neg_inf = torch.tensor(float("-inf"), device=dev)
out = {}


def step():
    scores = torch.addmm(item_b, user_f, item_f.t())
    scores.index_put_((seen_r, seen_c), neg_inf)
    if args.topk:
        top = torch.topk(scores, TOP, dim=1).indices
    else:
        top = scores.argsort(dim=1, descending=True)[:, :TOP]
    hits = test_mask.gather(1, top).float()
    metrics = {}
    for k in KS:
        h = hits[:, :k]
        dcg = (h * discount[:k]).sum(1)
        metrics[f"ndcg@{k}"] = (dcg / idcg[n_test.clamp(max=k)]).mean()
        metrics[f"recall@{k}"] = (h.sum(1) / n_test.clamp(max=k)).mean()
    metrics["mrr"] = (hits / ranks).amax(1).mean()
    out.update(scores=scores, top=top, metrics=metrics)


def check():
    # the scores against float64 on the host
    sc = out["scores"].cpu().numpy()
    want = user_f_h.astype(np.float64) @ item_f_h.T.astype(np.float64) + item_b_h
    want[seen_r_h, seen_c_h] = -np.inf
    fin = np.isfinite(want)
    if not (np.isfinite(sc) == fin).all():
        raise AssertionError("masked scores differ")
    err = np.abs(sc[fin] - want[fin]).max()
    if not err < 1e-4:
        raise AssertionError(f"scores differ from float64 by {err:.3g}")
    # the metrics from the device's own scores, ranked by NumPy
    order = np.argsort(-sc, axis=1, kind="stable")[:, :TOP]
    top = out["top"].cpu().numpy()
    same = (order == top).mean()
    if not same > 0.9999:
        raise AssertionError(f"top-{TOP} lists agree on only {same:.5f} of the positions")
    hits = np.take_along_axis(test_h, order, axis=1).astype(np.float64)
    disc = 1.0 / np.log2(np.arange(2, TOP + 2))
    ideal = np.concatenate([[0.0], np.cumsum(disc)])
    for k in KS:
        dcg = (hits[:, :k] * disc[:k]).sum(1)
        nk = np.minimum(n_test_h, k)
        want_m = {f"ndcg@{k}": (dcg / ideal[nk]).mean(),
                  f"recall@{k}": (hits[:, :k].sum(1) / nk).mean()}
        for name, w in want_m.items():
            got = float(out["metrics"][name])
            if not abs(got - w) < 1e-4:
                raise AssertionError(f"{name}: {got} vs NumPy {w}")
    mrr = (hits / np.arange(1, TOP + 1)).max(1).mean()
    if not abs(float(out["metrics"]["mrr"]) - mrr) < 1e-4:
        raise AssertionError(f"mrr {float(out['metrics']['mrr'])} vs NumPy {mrr}")
    if not 0.005 < float(out["metrics"]["ndcg@10"]) < 0.95:
        raise AssertionError(f"implausible NDCG@10 {float(out['metrics']['ndcg@10'])}")


run(step, name="torch_rank_eval", backend="torch", args=args,
    variant="topk" if args.topk else "baseline", check=check)
