"""A star-schema join and group-by in CuPy: a day of sales line items joined to the product
dimension, then revenue, margin and line counts per (store, category).

The fact table has 12M line items (int64 product key, int32 store 0..399, int32 quantity
1..12, float32 amount), in arrival order. The product dimension is a table sorted by its
surrogate key: 2M live products whose int64 keys are 1..2.5M with a fifth of the keys
retired, each with an int32 category (48 of them) and a float32 unit cost. Sales follow a
skewed (log-normal) product popularity; 0.3 % of the lines carry a retired key and find no
product.

The join is written the NumPy way, with the dimension keys sorted: ``searchsorted`` of the
fact keys in the 2M keys (16 MB), a clamp, a gather of the key found to test the match, and
gathers of the category and the cost. Lines that match go to group ``store * 48 +
category``, the others to one overflow group; margin is ``amount - quantity * cost``; then
three ``cupy.bincount`` (amount and margin as weights, and the plain count), each of which
checks ``(x < 0).any()`` and ``x.max()`` on the host before its atomic kernel. The result:
[400, 48] revenue, margin and line counts, the margin rate per category and the number of
unmatched lines.

``--dense-lookup`` builds, once when the dimension is loaded, two direct-address tables
over the key range (category, -1 for keys without a product, and unit cost; 2.5M entries
each, 20 MB) and replaces the binary search, the clamp and the three gathers with two
gathers by the fact key.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

N_FACT, KEY_RANGE, RETIRED = 12_000_000, 2_500_000, 0.2
N_STORES, N_CAT = 400, 48
N_GROUPS = N_STORES * N_CAT                        # plus one overflow group for misses
ORPHAN = 0.003


def make_tables(gen):
    """Host (NumPy) fact and dimension tables."""
    keys = np.arange(1, KEY_RANGE + 1, dtype=np.int64)
    live = gen.random(KEY_RANGE) >= RETIRED
    d_key = keys[live]                                          # sorted
    n_dim = d_key.size
    d_cat = gen.integers(0, N_CAT, n_dim).astype(np.int32)
    d_price = np.exp(gen.normal(2.5, 0.9, n_dim)).astype(np.float32)
    d_cost = (d_price * gen.uniform(0.55, 0.8, n_dim)).astype(np.float32)
    # product popularity: log-normal weights over the live products
    pop = np.exp(gen.normal(0.0, 1.5, n_dim))
    pick = gen.choice(n_dim, N_FACT, p=pop / pop.sum())
    f_prod = d_key[pick]
    orphan = gen.random(N_FACT) < ORPHAN
    retired = keys[~live]
    f_prod[orphan] = retired[gen.integers(0, retired.size, int(orphan.sum()))]
    f_store = gen.integers(0, N_STORES, N_FACT).astype(np.int32)
    f_qty = gen.integers(1, 13, N_FACT).astype(np.int32)
    price = np.where(orphan, np.float32(10.0), d_price[pick])
    f_amount = (f_qty * price * gen.uniform(0.7, 1.0, N_FACT)).astype(np.float32)
    return dict(d_key=d_key, d_cat=d_cat, d_cost=d_cost, f_prod=f_prod, f_store=f_store,
                f_qty=f_qty, f_amount=f_amount)


def host_query(t):
    """float64 NumPy reference: revenue, margin and counts per group (overflow group last)."""
    pos = np.minimum(np.searchsorted(t["d_key"], t["f_prod"]), t["d_key"].size - 1)
    hit = t["d_key"][pos] == t["f_prod"]
    grp = np.where(hit, t["f_store"] * N_CAT + t["d_cat"][pos], N_GROUPS)
    margin = t["f_amount"] - t["f_qty"] * t["d_cost"][pos].astype(np.float64)
    m = N_GROUPS + 1
    return (np.bincount(grp, weights=t["f_amount"].astype(np.float64), minlength=m),
            np.bincount(grp, weights=np.where(hit, margin, 0.0), minlength=m),
            np.bincount(grp, minlength=m))


def main():
    p = parser(__doc__)
    p.add_argument("--dense-lookup", action="store_true",
                   help="direct-address tables over the key range instead of searchsorted")
    args = p.parse_args()

    import cupy as cp

    host = make_tables(np.random.default_rng(0))
    t = {k: cp.asarray(v) for k, v in host.items()}
    d_key, d_cat, d_cost = t["d_key"], t["d_cat"], t["d_cost"]
    f_prod, f_store, f_qty, f_amount = t["f_prod"], t["f_store"], t["f_qty"], t["f_amount"]
    n_dim = d_key.size
    if args.dense_lookup:
        # built once with the dimension: surrogate keys are dense ints in 1..KEY_RANGE
        cat_by_key = cp.full(KEY_RANGE + 1, -1, cp.int32)
        cat_by_key[d_key] = d_cat
        cost_by_key = cp.zeros(KEY_RANGE + 1, cp.float32)
        cost_by_key[d_key] = d_cost
    out = {}

    def step():
        if args.dense_lookup:
            cat = cat_by_key[f_prod]
            cost = cost_by_key[f_prod]
            hit = cat >= 0
        else:
            pos = cp.searchsorted(d_key, f_prod)
            pos = cp.minimum(pos, n_dim - 1)
            hit = d_key[pos] == f_prod
            cat = d_cat[pos]
            cost = d_cost[pos]
        grp = cp.where(hit, f_store * N_CAT + cat, N_GROUPS)
        margin = f_amount - f_qty * cost
        rev = cp.bincount(grp, weights=f_amount, minlength=N_GROUPS + 1)
        mar = cp.bincount(grp, weights=margin, minlength=N_GROUPS + 1)
        cnt = cp.bincount(grp, minlength=N_GROUPS + 1)
        cat_rate = (mar[:N_GROUPS].reshape(N_STORES, N_CAT).sum(0)
                    / rev[:N_GROUPS].reshape(N_STORES, N_CAT).sum(0))
        out.update(rev=rev, mar=mar, cnt=cnt, cat_rate=cat_rate, unmatched=cnt[N_GROUPS])

    def check():
        want_rev, want_mar, want_cnt = host_query(host)
        cnt = cp.asnumpy(out["cnt"])
        if not (cnt == want_cnt).all():
            raise AssertionError(f"line counts differ in {int((cnt != want_cnt).sum())} groups")
        rev = cp.asnumpy(out["rev"])
        mar = cp.asnumpy(out["mar"])[:N_GROUPS]
        if not np.allclose(rev, want_rev, rtol=1e-9, atol=1e-6):
            raise AssertionError(f"revenue differs by {np.abs(rev - want_rev).max():.3g}")
        if not np.allclose(mar, want_mar[:N_GROUPS], rtol=1e-9, atol=1e-6):
            raise AssertionError(f"margin differs by {np.abs(mar - want_mar[:N_GROUPS]).max():.3g}")
        want_rate = (want_mar[:N_GROUPS].reshape(N_STORES, N_CAT).sum(0)
                     / want_rev[:N_GROUPS].reshape(N_STORES, N_CAT).sum(0))
        rate = cp.asnumpy(out["cat_rate"])
        if not (np.allclose(rate, want_rate, rtol=1e-9) and 0.1 < rate.min() < rate.max() < 0.5):
            raise AssertionError(f"margin rates {rate.min():.4f}..{rate.max():.4f}")
        frac = int(out["unmatched"]) / N_FACT
        if not 0.5 * ORPHAN < frac < 2 * ORPHAN:
            raise AssertionError(f"implausible share of unmatched lines {frac:.5f}")

    run(step, name="cupy_star_join", backend="cupy", args=args,
        variant="dense_lookup" if args.dense_lookup else "baseline", check=check)


if __name__ == "__main__":
    main()
