"""Metropolis Monte Carlo of the 2-D Ising model on a 16384 x 16384 periodic lattice, with
checkerboard updates in a CuPy RawModule.

268M spins (J = 1, no field) at T = 2.0, below the critical temperature 2.269, started
ordered (all +1). The lattice is stored as its two checkerboard colours, each a
[16384, 8192] int8 array (128 MB) of the sites (i, j) with (i + j) even ("black") or odd
("white"), so that a colour's update reads its own spins and four neighbours of the other
colour from contiguous rows (the layout of GPU Ising codes such as Romero et al. 2020).
One sweep is two launches: all black sites, then all white sites. A thread updates four
consecutive sites of one row with 4-byte vector loads and stores; its neighbours are the
same four positions in the rows above and below and in its own row of the other colour,
plus one more spin to the left or the right depending on the row's parity. The Metropolis
acceptance uses the two Boltzmann factors exp(-4/T) and exp(-8/T) passed as arguments and
uniforms from a counter-based Philox4x32-10 generator (key: the seed; counter: the thread's
quadruple of sites, the sweep and the colour), one call giving the four uniforms of the
thread's four sites, so the result does not depend on the launch configuration.

After every sweep a measurement kernel sums the magnetisation and the bond energy
(-s_i s_j over the bonds, counted once from the black sites) with warp shuffles, a
shared-memory combine and one 64-bit ``atomicAdd`` per block into that sweep's slot. One step
of the program is 8 sweeps: 24 launches and a memset of the 8 slots.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

L, TEMP, SWEEPS, SEED = 16384, 2.0, 8, 20240611
THREADS = 256

ISING_SRC = r"""
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k)
{
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        const unsigned hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        const unsigned hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k.x += 0x9E3779B9u;
        k.y += 0xBB67AE85u;
    }
    return c;
}

__device__ __forceinline__ int flip(int s, int nb, unsigned r, float p4, float p8)
{
    const int x = s * nb;                       // Delta E = 2 x
    const float u = (float)(r >> 8) * (1.0f / 16777216.0f);
    const bool accept = x <= 0 || (x == 2 && u < p4) || (x == 4 && u < p8);
    return accept ? -s : s;
}

// Update every site of one colour. own/other: [L][L/2] int8 spins of this colour and the
// other one; site (i, k) of colour c sits at column j = 2k + ((i + c) & 1).
extern "C" __global__ void __launch_bounds__(256)
metropolis_color(signed char* __restrict__ own, const signed char* __restrict__ other,
                 int lat, int color, float p4, float p8, unsigned seed, unsigned sweep)
{
    const int half = lat >> 1;
    const int q = blockIdx.x * blockDim.x + threadIdx.x;   // quadruple of sites in the row
    const int k0 = q * 4;
    const int i = blockIdx.y;
    if (k0 >= half) return;
    const int up = (i == 0) ? lat - 1 : i - 1;
    const int dn = (i == lat - 1) ? 0 : i + 1;
    const size_t row = (size_t)i * half;
    const char4 s = *reinterpret_cast<const char4*>(own + row + k0);
    const char4 a = *reinterpret_cast<const char4*>(other + (size_t)up * half + k0);
    const char4 b = *reinterpret_cast<const char4*>(other + (size_t)dn * half + k0);
    const char4 c = *reinterpret_cast<const char4*>(other + row + k0);
    // the side neighbour that is not at the same k: k - 1 if (i + color) is even, else k + 1
    const bool left = ((i + color) & 1) == 0;
    int kx = left ? k0 - 1 : k0 + 4;
    if (kx < 0) kx += half;
    if (kx >= half) kx -= half;
    const int e = other[row + kx];
    const int n0 = a.x + b.x + c.x + (left ? e : c.y);
    const int n1 = a.y + b.y + c.y + (left ? c.x : c.z);
    const int n2 = a.z + b.z + c.z + (left ? c.y : c.w);
    const int n3 = a.w + b.w + c.w + (left ? c.z : e);
    const unsigned site = (unsigned)i * (unsigned)(half >> 2) + (unsigned)q;
    const uint4 r = philox4x32_10(make_uint4(site, sweep, (unsigned)color, 0u),
                                  make_uint2(seed, 0x6A09E667u));
    char4 t;
    t.x = (signed char)flip(s.x, n0, r.x, p4, p8);
    t.y = (signed char)flip(s.y, n1, r.y, p4, p8);
    t.z = (signed char)flip(s.z, n2, r.z, p4, p8);
    t.w = (signed char)flip(s.w, n3, r.w, p4, p8);
    *reinterpret_cast<char4*>(own + row + k0) = t;
}

// Magnetisation and bond energy, accumulated into acc[2 * slot] and acc[2 * slot + 1].
extern "C" __global__ void __launch_bounds__(256)
measure(const signed char* __restrict__ black, const signed char* __restrict__ white,
        int lat, unsigned long long* acc, int slot)
{
    __shared__ int s_m[8], s_e[8];
    const int half = lat >> 1;
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    const int k0 = q * 4;
    const int i = blockIdx.y;
    int m = 0, e = 0;
    if (k0 < half) {
        const int up = (i == 0) ? lat - 1 : i - 1;
        const int dn = (i == lat - 1) ? 0 : i + 1;
        const size_t row = (size_t)i * half;
        const char4 s = *reinterpret_cast<const char4*>(black + row + k0);
        const char4 a = *reinterpret_cast<const char4*>(white + (size_t)up * half + k0);
        const char4 b = *reinterpret_cast<const char4*>(white + (size_t)dn * half + k0);
        const char4 c = *reinterpret_cast<const char4*>(white + row + k0);
        const bool left = (i & 1) == 0;
        int kx = left ? k0 - 1 : k0 + 4;
        if (kx < 0) kx += half;
        if (kx >= half) kx -= half;
        const int x = white[row + kx];
        m = s.x + s.y + s.z + s.w + c.x + c.y + c.z + c.w;
        e = -(s.x * (a.x + b.x + c.x + (left ? x : c.y)) + s.y * (a.y + b.y + c.y + (left ? c.x : c.z))
              + s.z * (a.z + b.z + c.z + (left ? c.y : c.w)) + s.w * (a.w + b.w + c.w + (left ? c.z : x)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        m += __shfl_xor_sync(0xffffffffu, m, o);
        e += __shfl_xor_sync(0xffffffffu, e, o);
    }
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) { s_m[warp] = m; s_e[warp] = e; }
    __syncthreads();
    if (threadIdx.x == 0) {
        long long bm = 0, be = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { bm += s_m[w]; be += s_e[w]; }
        atomicAdd(&acc[2 * slot], (unsigned long long)bm);
        atomicAdd(&acc[2 * slot + 1], (unsigned long long)be);
    }
}
"""


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """NumPy Philox4x32-10 on uint32 arrays (the kernel's rounds)."""
    m = np.uint64(0xFFFFFFFF)
    c = [np.asarray(v, np.uint64) for v in (c0, c1, c2, c3)]
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & m
        hi1, lo1 = p1 >> np.uint64(32), p1 & m
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + np.uint64(0x9E3779B9)) & m
        k1 = (k1 + np.uint64(0xBB67AE85)) & m
    return c


def to_full(black, white):
    n = black.shape[0]
    full = np.empty((n, n), np.int8)
    i = np.arange(n)[:, None]
    k = np.arange(n // 2)[None, :]
    full[i, 2 * k + (i & 1)] = black
    full[i, 2 * k + ((i + 1) & 1)] = white
    return full


def host_sweep(black, white, seed, sweep, p4, p8):
    """One sweep (black, then white) in NumPy with the kernel's random numbers."""
    n = black.shape[0]
    half = n // 2
    own_other = [(black, white), (white, black)]
    for color, (own, other) in enumerate(own_other):
        i = np.arange(n)[:, None]
        k = np.arange(half)[None, :]
        left = ((i + color) & 1) == 0
        side = np.where(left, other[i, (k - 1) % half], other[i, (k + 1) % half])
        nb = (other[(i - 1) % n, k].astype(np.int32) + other[(i + 1) % n, k] + other[i, k]
              + side)
        q = (i * (half // 4) + k // 4).astype(np.uint64)
        r = philox4x32_10(q, np.full_like(q, sweep), np.full_like(q, color), np.zeros_like(q),
                          seed, 0x6A09E667)
        comp = np.choose((k % 4) * np.ones_like(q, dtype=np.int64), r)
        u = (comp >> np.uint64(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)
        x = own.astype(np.int32) * nb
        acc = (x <= 0) | ((x == 2) & (u < p4)) | ((x == 4) & (u < p8))
        own[...] = np.where(acc, -own, own)


def main():
    p = parser(__doc__)
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=ISING_SRC, options=("-std=c++17",))
    update = mod.get_function("metropolis_color")
    measure = mod.get_function("measure")
    p4 = np.float32(math.exp(-4.0 / TEMP))
    p8 = np.float32(math.exp(-8.0 / TEMP))

    def grid(n):
        return ((n // 2 // 4 + THREADS - 1) // THREADS, n)

    black = cp.ones((L, L // 2), cp.int8)
    white = cp.ones((L, L // 2), cp.int8)
    acc = cp.zeros(2 * SWEEPS, cp.uint64)
    state = {"sweep": 0}

    def step():
        acc.fill(0)
        for s in range(SWEEPS):
            sw = np.uint32(state["sweep"] + s)
            update(grid(L), (THREADS,), (black, white, np.int32(L), np.int32(0), p4, p8,
                                         np.uint32(SEED), sw))
            update(grid(L), (THREADS,), (white, black, np.int32(L), np.int32(1), p4, p8,
                                         np.uint32(SEED), sw))
            measure(grid(L), (THREADS,), (black, white, np.int32(L), acc, np.int32(s)))
        state["sweep"] += SWEEPS

    def check():
        # the kernels against NumPy on a 64 x 64 lattice with random spins
        n = 64
        gen = np.random.default_rng(1)
        hb = np.where(gen.random((n, n // 2)) < 0.5, 1, -1).astype(np.int8)
        hw = np.where(gen.random((n, n // 2)) < 0.5, 1, -1).astype(np.int8)
        db, dw = cp.asarray(hb), cp.asarray(hw)
        small = cp.zeros(2, cp.uint64)
        for sw in (7, 8):
            update(grid(n), (THREADS,), (db, dw, np.int32(n), np.int32(0), p4, p8,
                                         np.uint32(SEED), np.uint32(sw)))
            update(grid(n), (THREADS,), (dw, db, np.int32(n), np.int32(1), p4, p8,
                                         np.uint32(SEED), np.uint32(sw)))
            host_sweep(hb, hw, SEED, sw, p4, p8)
        measure(grid(n), (THREADS,), (db, dw, np.int32(n), small, np.int32(0)))
        if not (cp.asnumpy(db) == hb).all() or not (cp.asnumpy(dw) == hw).all():
            raise AssertionError("64 x 64 sweeps differ from NumPy")
        full = to_full(hb, hw).astype(np.int64)
        m_want = int(full.sum())
        e_want = int(-(full * (np.roll(full, 1, 0) + np.roll(full, 1, 1))).sum())
        m_got, e_got = (int(v) for v in cp.asnumpy(small).view(np.int64))
        if (m_got, e_got) != (m_want, e_want):
            raise AssertionError(f"measure: ({m_got}, {e_got}) vs NumPy ({m_want}, {e_want})")
        # the big lattice: measured sums against CuPy, then the physics after the warm-up
        sums = cp.asnumpy(acc).view(np.int64).reshape(SWEEPS, 2)
        m_now = int(black.sum(dtype=cp.int64) + white.sum(dtype=cp.int64))
        if sums[-1, 0] != m_now:
            raise AssertionError(f"magnetisation {sums[-1, 0]} vs CuPy sum {m_now}")
        n_sites = L * L
        mag, energy = sums[-1, 0] / n_sites, sums[-1, 1] / n_sites
        # Onsager: m = 0.9113 and u = -1.7456 per site at T = 2.0
        if not (0.89 < mag < 0.93 and -1.77 < energy < -1.72):
            raise AssertionError(f"m = {mag:.4f}, u = {energy:.4f} per site at T = {TEMP}")

    run(step, name="cuda_ising_metropolis", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
