"""Monte-Carlo particle transport through a 1-D slab in CuPy raw kernels.

Each step a source kernel samples 8M particles (half photons, 30% electrons, 20% neutrons,
mixed at random across the array) and one transport kernel follows each particle in its own
thread with an in-kernel xorshift generator. The three kinds take different code paths and
very different numbers of iterations (photons: a few long flights; electrons: up to 64
short continuous-slowing-down steps; neutrons: up to 32 elastic collisions with log, sqrt
and cos), so neighbouring threads of a warp follow different branches. Deposited energy is
tallied into 1024 depth bins with atomics. ``--sorted`` orders the particles by kind
(``cupy.argsort`` and gathers) before transport, so that most warps hold a single kind.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, run  # noqa: E402

MC_SRC = r"""
__device__ __forceinline__ unsigned int hash32(unsigned int a)
{
    a = (a ^ 61u) ^ (a >> 16);
    a *= 9u;
    a ^= a >> 4;
    a *= 0x27d4eb2du;
    a ^= a >> 15;
    return a ? a : 1u;                          // xorshift state must not be zero
}

__device__ __forceinline__ float urand(unsigned int& s)   // xorshift32, uniform in [0, 1)
{
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return (float)(s >> 8) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ void deposit(float* tally, int nbins, float slab, float x, float de)
{
    int b = (int)(x * ((float)nbins / slab));
    b = min(max(b, 0), nbins - 1);
    atomicAdd(&tally[b], de);
}

extern "C" __global__ void source(float* x, float* mu, float* e, int* kind, int n, float slab,
                                  unsigned int seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int s = hash32((unsigned int)i * 0x9E3779B9u ^ seed);
    float u = urand(s);
    kind[i] = u < 0.5f ? 0 : (u < 0.8f ? 1 : 2);   // photon, electron, neutron
    x[i] = slab * (0.25f + 0.5f * urand(s));
    mu[i] = 2.0f * urand(s) - 1.0f;
    e[i] = 0.5f + 1.5f * urand(s);
}

extern "C" __global__ void transport(const float* __restrict__ x0, const float* __restrict__ mu0,
                                     const float* __restrict__ e0, const int* __restrict__ kind,
                                     float* __restrict__ e1, float* __restrict__ tally,
                                     int n, int nbins, float slab, unsigned int seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int s = hash32((unsigned int)i * 0x85EBCA6Bu ^ seed);
    float x = x0[i], mu = mu0[i], e = e0[i];
    int k = kind[i];

    if (k == 0) {                                   // photon
        for (int it = 0; it < 6 && e > 0.01f; ++it) {
            float d = -logf(1.0f - urand(s)) * 0.15f * slab / (0.5f + e);
            x += mu * d;
            if (x < 0.0f || x >= slab) break;       // escapes, keeps its energy
            if (urand(s) < 0.1f) {                  // photoabsorption
                deposit(tally, nbins, slab, x, e);
                e = 0.0f;
                break;
            }
            float de = e * (0.1f + 0.4f * urand(s));   // Compton-like loss
            deposit(tally, nbins, slab, x, de);
            e -= de;
            mu = 2.0f * urand(s) - 1.0f;
        }
    } else if (k == 1) {                            // electron: continuous slowing down
        float acc = 0.0f;
        float step = 0.002f * slab;
        for (int it = 0; it < 64 && e > 0.01f; ++it) {
            x += mu * step;
            if (x < 0.0f || x >= slab) break;
            float de = fminf(0.03f * e + 0.002f, e);
            e -= de;
            acc += de;
            mu = fminf(fmaxf(mu + 0.2f * (urand(s) - 0.5f), -1.0f), 1.0f);
            if ((it & 15) == 15) {
                deposit(tally, nbins, slab, x, acc);
                acc = 0.0f;
            }
        }
        if (acc > 0.0f) deposit(tally, nbins, slab, x, acc);
    } else {                                        // neutron: elastic scattering on A = 12
        const float A = 12.0f;
        for (int it = 0; it < 32 && e > 1e-3f; ++it) {
            float d = -logf(1.0f - urand(s)) * 0.05f * slab;
            x += mu * d;
            if (x < 0.0f || x >= slab) break;
            if (urand(s) < 0.03f) {                 // capture
                deposit(tally, nbins, slab, x, e);
                e = 0.0f;
                break;
            }
            float c = 2.0f * urand(s) - 1.0f;       // cosine of the centre-of-mass angle
            float r2 = A * A + 2.0f * A * c + 1.0f;
            float ratio = r2 / ((A + 1.0f) * (A + 1.0f));
            deposit(tally, nbins, slab, x, e * (1.0f - ratio));
            e *= ratio;
            float cl = (1.0f + A * c) * rsqrtf(r2);   // cosine of the lab angle
            float phi = 6.2831853f * urand(s);
            mu = mu * cl + sqrtf(fmaxf(0.0f, 1.0f - mu * mu)) *
                           sqrtf(fmaxf(0.0f, 1.0f - cl * cl)) * cosf(phi);
            mu = fminf(fmaxf(mu, -1.0f), 1.0f);
        }
    }
    e1[i] = e;
}
"""

N, NBINS, SLAB, BLOCK = 1 << 23, 1024, 10.0, 256


def main():
    p = parser(__doc__)
    p.add_argument("--sorted", action="store_true", help="sort particles by kind first")
    args = p.parse_args()
    import cupy as cp
    import numpy as np

    mod = cp.RawModule(code=MC_SRC)
    k_source = mod.get_function("source")
    k_transport = mod.get_function("transport")
    x = cp.empty(N, cp.float32)
    mu = cp.empty(N, cp.float32)
    e0 = cp.empty(N, cp.float32)
    kind = cp.empty(N, cp.int32)
    e1 = cp.empty(N, cp.float32)
    tally = cp.zeros(NBINS, cp.float32)
    grid = ((N + BLOCK - 1) // BLOCK,)
    state = {"seed": 12345}
    out = {}

    def step():
        seed = np.uint32(state["seed"])
        state["seed"] = (state["seed"] * 1103515245 + 12345) & 0xFFFFFFFF
        tally.fill(0)
        k_source(grid, (BLOCK,), (x, mu, e0, kind, np.int32(N), np.float32(SLAB), seed))
        if args.sorted:
            order = cp.argsort(kind)
            xs, mus, es, ks = x[order], mu[order], e0[order], kind[order]
        else:
            xs, mus, es, ks = x, mu, e0, kind
        k_transport(grid, (BLOCK,), (xs, mus, es, ks, e1, tally, np.int32(N), np.int32(NBINS),
                                     np.float32(SLAB), seed ^ np.uint32(0xA5A5A5A5)))
        out["left"] = cp.sum(e1, dtype=cp.float64)      # energy still carried or escaped

    def check():
        source = float(cp.sum(e0, dtype=cp.float64))
        deposited = float(cp.sum(tally, dtype=cp.float64))
        left = float(out["left"])
        if not abs(deposited + left - source) < 1e-2 * source:
            raise AssertionError(f"energy not conserved: {deposited} + {left} vs {source}")
        if not 0.05 * source < deposited < source:
            raise AssertionError(f"implausible deposit {deposited} of {source}")
        counts = np.bincount(kind.get(), minlength=3)
        if not (abs(counts / N - np.array([0.5, 0.3, 0.2])) < 0.01).all():
            raise AssertionError(f"kind mix {counts / N}")

    run(step, name="cuda_montecarlo", backend="cupy", args=args,
        variant="sorted" if args.sorted else "baseline", check=check)


if __name__ == "__main__":
    main()
