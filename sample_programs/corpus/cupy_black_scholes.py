"""European option pricing (Black-Scholes) of 32M options with CuPy, three ways.

Each option has its own spot S in [5, 30], strike K in [1, 100], maturity T in [0.25, 10]
years and volatility in [0.1, 0.6]; the risk-free rate is one scalar. The pricing service's
production path is written as plain CuPy array expressions in float64, the way the NumPy
prototype was (``cupyx.scipy.special.ndtr`` standing in for ``scipy.stats.norm.cdf``): every
operator is its own kernel and its own 256 MB temporary. Next to it, for comparison, the same
formula as one ``cupy.ElementwiseKernel`` (log, sqrt, exp, and the normal CDF from ``erfc``)
that takes a type parameter ``T``, run on float64 inputs and on float32 copies of them.
Call and put prices come out of each; put-call parity and the three results are checked.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

N_OPTIONS, RATE = 32 * 1024 * 1024, 0.02

BS_BODY = r"""
    T sqrt_t = sqrt(t);
    T d1 = (log(S / K) + (r + 0.5 * v * v) * t) / (v * sqrt_t);
    T d2 = d1 - v * sqrt_t;
    T cnd1 = 0.5 * erfc(-d1 * 0.7071067811865476);     // N(d1)
    T cnd2 = 0.5 * erfc(-d2 * 0.7071067811865476);     // N(d2)
    T k_disc = K * exp(-r * t);
    call = S * cnd1 - k_disc * cnd2;
    put = k_disc * (1 - cnd2) - S * (1 - cnd1);
"""


def price_expressions(S, K, T, sigma, r):
    """The production path: the NumPy formula, ported one-to-one to CuPy."""
    import cupy as cp
    from cupyx.scipy.special import ndtr

    sqrt_t = cp.sqrt(T)
    d1 = (cp.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    k_disc = K * cp.exp(-r * T)
    call = S * ndtr(d1) - k_disc * ndtr(d2)
    put = k_disc * ndtr(-d2) - S * ndtr(-d1)
    return call, put


def main():
    args = parser(__doc__).parse_args()
    import cupy as cp

    bs_kernel = cp.ElementwiseKernel("T S, T K, T t, T v, T r", "T call, T put", BS_BODY,
                                     "black_scholes")
    cp.random.seed(2024)
    S = cp.random.uniform(5.0, 30.0, N_OPTIONS)
    K = cp.random.uniform(1.0, 100.0, N_OPTIONS)
    T = cp.random.uniform(0.25, 10.0, N_OPTIONS)
    sigma = cp.random.uniform(0.1, 0.6, N_OPTIONS)
    S32, K32, T32, sigma32 = (a.astype(cp.float32) for a in (S, K, T, sigma))
    call64, put64 = cp.empty_like(S), cp.empty_like(S)
    call32, put32 = cp.empty_like(S32), cp.empty_like(S32)
    out = {}

    def step():
        bs_kernel(S, K, T, sigma, RATE, call64, put64)
        bs_kernel(S32, K32, T32, sigma32, RATE, call32, put32)
        out["call"], out["put"] = price_expressions(S, K, T, sigma, RATE)

    def check():
        parity = float(cp.abs(call64 - put64 - (S - K * cp.exp(-RATE * T))).max())
        if not parity < 1e-7:
            raise AssertionError(f"put-call parity off by {parity:.3g}")
        for name, got, ref in (("expressions call", out["call"], call64),
                               ("expressions put", out["put"], put64)):
            err = float(cp.abs(got - ref).max())
            if not err < 1e-9:
                raise AssertionError(f"{name}: differs from the float64 kernel by {err:.3g}")
        for name, got, ref in (("float32 call", call32, call64), ("float32 put", put32, put64)):
            err = float(cp.abs(got.astype(cp.float64) - ref).max())
            if not err < 1e-3:
                raise AssertionError(f"{name}: differs from float64 by {err:.3g}")
        if not bool(((call64 >= -1e-9) & (put64 >= -1e-9)).all()):
            raise AssertionError("negative option price")
        if not math.isfinite(float(call64.sum() + put64.sum())):
            raise AssertionError("non-finite prices")

    run(step, name="cupy_black_scholes", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
