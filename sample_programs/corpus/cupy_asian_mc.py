"""Monte-Carlo pricing of arithmetic-average Asian calls with CuPy array code.

A risk desk's end-of-day revaluation of a strip of one-year Asian calls on one underlying
under geometric Brownian motion (spot 100, rate 3 %, volatility 25 %, 252 daily fixings),
written the way it is prototyped in NumPy and moved to CuPy: 1M paths (float32 normals from
``cupy.random.RandomState``, cuRAND), log increments as two array expressions, the log-price
paths by ``cupy.cumsum`` along the fixings, prices by ``exp``, and per path the arithmetic
and geometric averages and the running maximum. From these:

- arithmetic-average calls at 8 strikes (80-115), with the geometric-average call as a
  control variate (its price has a closed form): per-strike regression coefficient from the
  sample covariance, adjusted prices and standard errors;
- the same calls with an up-and-out barrier at 140 on the daily closes (no control variate).

About 30 CuPy array operations a step (the four [1M, 252] float32 passes, 1 GB each, carry
most of the time; the payoff arithmetic is on [1M, 8] arrays). Not planted with anything:
the code does what such a prototype does, including the full 1 GB temporaries.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

PATHS, FIXINGS = 1 << 20, 252
S0, RATE, VOL, MATURITY = 100.0, 0.03, 0.25, 1.0
STRIKES = np.array([80, 85, 90, 95, 100, 105, 110, 115], np.float32)
BARRIER = 140.0


def geometric_asian_call(s0, k, r, sigma, t, n):
    """Closed form of the discretely monitored geometric-average call (fixings t/n..t)."""
    dt = t / n
    mu = math.log(s0) + (r - 0.5 * sigma ** 2) * dt * (n + 1) / 2
    var = sigma ** 2 * dt * (n + 1) * (2 * n + 1) / (6 * n)
    sd = math.sqrt(var)
    d1 = (mu - math.log(k) + var) / sd
    d2 = d1 - sd
    ncdf = lambda x: 0.5 * math.erfc(-x / math.sqrt(2))  # noqa: E731
    return math.exp(-r * t) * (math.exp(mu + 0.5 * var) * ncdf(d1) - k * ncdf(d2))


def main():
    p = parser(__doc__)
    args = p.parse_args()

    import cupy as cp

    rs = cp.random.RandomState(seed=20240611)
    dt = MATURITY / FIXINGS
    drift = np.float32((RATE - 0.5 * VOL ** 2) * dt)
    vol_dt = np.float32(VOL * math.sqrt(dt))
    strikes = cp.asarray(STRIKES)
    disc = np.float32(math.exp(-RATE * MATURITY))
    log_barrier = np.float32(math.log(BARRIER / S0))
    geo_exact = cp.asarray(np.array([geometric_asian_call(S0, k, RATE, VOL, MATURITY, FIXINGS)
                                     for k in STRIKES], np.float32))
    out = {}

    def step():
        z = rs.standard_normal((PATHS, FIXINGS), dtype=cp.float32)
        incr = z * vol_dt
        incr += drift
        log_s = cp.cumsum(incr, axis=1)
        s = S0 * cp.exp(log_s)
        arith = s.mean(axis=1)
        geo = S0 * cp.exp(log_s.mean(axis=1))
        knocked = log_s.max(axis=1) >= log_barrier

        pay_a = disc * cp.maximum(arith[:, None] - strikes[None, :], 0)
        pay_g = disc * cp.maximum(geo[:, None] - strikes[None, :], 0)
        mean_a = pay_a.mean(axis=0)
        mean_g = pay_g.mean(axis=0)
        cov = ((pay_a - mean_a) * (pay_g - mean_g)).mean(axis=0)
        var_g = pay_g.var(axis=0)
        beta = cov / var_g
        adj = pay_a - beta * (pay_g - geo_exact)
        price_cv = adj.mean(axis=0)
        se_cv = adj.std(axis=0) / math.sqrt(PATHS)

        pay_b = cp.where(knocked[:, None], 0, pay_a)
        price_b = pay_b.mean(axis=0)
        se_b = pay_b.std(axis=0) / math.sqrt(PATHS)
        out.update(z=z, arith=arith, geo=geo, knocked=knocked, mean_a=mean_a, mean_g=mean_g,
                   price_cv=price_cv, se_cv=se_cv, price_b=price_b, se_b=se_b)

    def check():
        # per-path statistics of the first 4096 paths from the same normals, float64
        z = cp.asnumpy(out["z"][:4096]).astype(np.float64)
        log_s = np.cumsum((RATE - 0.5 * VOL ** 2) * dt + VOL * math.sqrt(dt) * z, axis=1)
        arith = S0 * np.exp(log_s).mean(1)
        geo = S0 * np.exp(log_s.mean(1))
        for name, want in (("arith", arith), ("geo", geo)):
            got = cp.asnumpy(out[name][:4096])
            if not np.abs(got / want - 1).max() < 2e-5:
                raise AssertionError(f"path {name} averages off by "
                                     f"{np.abs(got / want - 1).max():.3g}")
        knock = (log_s.max(1) >= math.log(BARRIER / S0))
        got_k = cp.asnumpy(out["knocked"][:4096])
        near = np.abs(log_s.max(1) - math.log(BARRIER / S0)) < 1e-5
        if not ((got_k == knock) | near).all():
            raise AssertionError("barrier hits differ")
        zz = out["z"]
        m, sd = float(zz.mean()), float(zz.std())
        if not (abs(m) < 1e-3 and abs(sd - 1) < 1e-3):
            raise AssertionError(f"normals: mean {m:.3g}, std {sd:.5f}")
        # the geometric calls against their closed form, the control-variate prices
        mean_g = cp.asnumpy(out["mean_g"]).astype(np.float64)
        exact = cp.asnumpy(geo_exact).astype(np.float64)
        if not np.abs(mean_g - exact).max() < 0.05 + 5e-3 * exact.max():
            raise AssertionError(f"geometric calls {mean_g} vs closed form {exact}")
        pcv, se = cp.asnumpy(out["price_cv"]), cp.asnumpy(out["se_cv"])
        pa = cp.asnumpy(out["mean_a"])
        if not (np.all(np.diff(pcv) < 0) and np.all(pcv > exact) and np.all(se < 2e-3)
                and np.all(np.abs(pcv - pa) < 0.1)):
            raise AssertionError(f"implausible control-variate prices {pcv} (se {se})")
        pb = cp.asnumpy(out["price_b"])
        if not (np.all(pb <= pa + 1e-4) and np.all(np.diff(pb) < 0) and pb[0] > 0.5 * pa[0]):
            raise AssertionError(f"implausible barrier prices {pb}")

    run(step, name="cupy_asian_mc", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
