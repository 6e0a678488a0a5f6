"""A 2-D electrostatic particle-in-cell step in CuPy (two-stream instability, periodic box).

16M electrons (float32 positions and velocities, 256 MB) on a 1024 x 1024 periodic grid of a
64 x 64 box (Debye-length units, immobile neutralising ions, plasma frequency 1, dt 0.1),
two counter-streaming beams at +-3 along x with a small sinusoidal density perturbation.
One step of the program is one leapfrog step:

- cloud-in-cell charge deposition written with array expressions: grid coordinates,
  ``floor``, fractions, the four corners' periodic flat indices and bilinear weights, and
  four ``cupyx.scatter_add`` calls into the density (atomics, particles in random order);
- the field from a spectral Poisson solve: ``rfft2`` of the charge density (ions as the
  mean), multiplication by precomputed -i k / k^2 spectra for the two components and two
  ``irfft2``, stacked into a [cells, 2] field;
- gather interpolation: the field rows at the four corners (fancy indexing) times the
  same weights, summed;
- the push and periodic wrap in one ``cupy.fuse`` kernel.

``--fused`` does the deposition in one ``ElementwiseKernel`` (per particle: weights,
corners and four ``atomicAdd``) and the gather and push in another, instead of about 40
array operations on particle-sized temporaries.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

N_PART = 1 << 24
NG = 1024
L = 64.0
DX = L / NG
DT = 0.1
V0 = 3.0
QM = -1.0                                        # electron charge / mass
Q = -(L * L) / N_PART                            # charge per particle (mean density 1)


def main():
    p = parser(__doc__)
    p.add_argument("--fused", action="store_true",
                   help="deposition and gather+push as two ElementwiseKernels")
    args = p.parse_args()

    import cupy as cp
    import cupyx

    rng = cp.random.default_rng(0)
    px = rng.random(N_PART, dtype=cp.float32) * np.float32(L)
    px = (px + np.float32(0.02 * L / (2 * math.pi)) * cp.sin(px * np.float32(2 * math.pi / L))
          ) % np.float32(L)
    py = rng.random(N_PART, dtype=cp.float32) * np.float32(L)
    beam = cp.where(cp.arange(N_PART) % 2 == 0, np.float32(V0), np.float32(-V0))
    vx = (beam + 0.1 * rng.standard_normal(N_PART, dtype=cp.float32)).astype(cp.float32)
    vy = (0.1 * rng.standard_normal(N_PART, dtype=cp.float32)).astype(cp.float32)
    perm = cp.argsort(rng.random(N_PART, dtype=cp.float32))
    px, py, vx, vy = px[perm], py[perm], vx[perm], vy[perm]

    k = 2 * np.pi * np.fft.fftfreq(NG, d=DX)
    kr = 2 * np.pi * np.fft.rfftfreq(NG, d=DX)
    ky, kx = np.meshgrid(k, kr, indexing="ij")                    # [NG, NG//2 + 1]
    k2 = kx ** 2 + ky ** 2
    k2[0, 0] = 1.0
    inv_k2 = 1.0 / k2
    inv_k2[0, 0] = 0.0
    gx_spec = cp.asarray((-1j * kx * inv_k2).astype(np.complex64))  # E_k = -i k phi_k
    gy_spec = cp.asarray((-1j * ky * inv_k2).astype(np.complex64))
    inv_dx = np.float32(1.0 / DX)
    f32 = np.float32

    @cp.fuse()
    def push(x, y, vx, vy, ex, ey):
        vx = vx + f32(QM * DT) * ex
        vy = vy + f32(QM * DT) * ey
        x = x + f32(DT) * vx
        y = y + f32(DT) * vy
        x = x - f32(L) * cp.floor(x * f32(1.0 / L))
        y = y - f32(L) * cp.floor(y * f32(1.0 / L))
        return x, y, vx, vy

    deposit_kernel = cp.ElementwiseKernel(
        "float32 x, float32 y, float32 inv_dx, int32 ng, float32 q", "raw float32 rho",
        """
        float gx = x * inv_dx, gy = y * inv_dx;
        int ix = (int)floorf(gx), iy = (int)floorf(gy);
        float fx = gx - ix, fy = gy - iy;
        ix = ix % ng; iy = iy % ng;
        int ix1 = (ix + 1) % ng, iy1 = (iy + 1) % ng;
        atomicAdd(&rho[iy * ng + ix], q * (1.f - fx) * (1.f - fy));
        atomicAdd(&rho[iy * ng + ix1], q * fx * (1.f - fy));
        atomicAdd(&rho[iy1 * ng + ix], q * (1.f - fx) * fy);
        atomicAdd(&rho[iy1 * ng + ix1], q * fx * fy);
        """, "cic_deposit")
    gather_push_kernel = cp.ElementwiseKernel(
        "raw float32 field, float32 inv_dx, int32 ng, float32 qm_dt, float32 dt, float32 box",
        "float32 x, float32 y, float32 vx, float32 vy",
        """
        float gx = x * inv_dx, gy = y * inv_dx;
        int ix = (int)floorf(gx), iy = (int)floorf(gy);
        float fx = gx - ix, fy = gy - iy;
        ix = ix % ng; iy = iy % ng;
        int ix1 = (ix + 1) % ng, iy1 = (iy + 1) % ng;
        float w00 = (1.f - fx) * (1.f - fy), w10 = fx * (1.f - fy);
        float w01 = (1.f - fx) * fy, w11 = fx * fy;
        int c00 = 2 * (iy * ng + ix), c10 = 2 * (iy * ng + ix1);
        int c01 = 2 * (iy1 * ng + ix), c11 = 2 * (iy1 * ng + ix1);
        float ex = w00 * field[c00] + w10 * field[c10] + w01 * field[c01] + w11 * field[c11];
        float ey = w00 * field[c00 + 1] + w10 * field[c10 + 1] + w01 * field[c01 + 1]
                 + w11 * field[c11 + 1];
        vx += qm_dt * ex;
        vy += qm_dt * ey;
        x += dt * vx;
        y += dt * vy;
        x -= box * floorf(x / box);
        y -= box * floorf(y / box);
        """, "cic_gather_push")

    def cic(x, y):
        """Periodic flat corner indices and bilinear weights of every particle."""
        gx = x * inv_dx
        gy = y * inv_dx
        i = cp.floor(gx)
        j = cp.floor(gy)
        fx = gx - i
        fy = gy - j
        i = i.astype(cp.int32) % NG
        j = j.astype(cp.int32) % NG
        i1 = (i + 1) % NG
        j1 = (j + 1) % NG
        gx1 = 1.0 - fx
        gy1 = 1.0 - fy
        idx = (j * NG + i, j * NG + i1, j1 * NG + i, j1 * NG + i1)
        w = (gx1 * gy1, fx * gy1, gx1 * fy, fx * fy)
        return idx, w

    def deposit(x, y):
        rho = cp.zeros(NG * NG, dtype=cp.float32)
        if args.fused:
            deposit_kernel(x, y, inv_dx, np.int32(NG), f32(Q), rho)
            return rho, None
        idx, w = cic(x, y)
        for c in range(4):
            cupyx.scatter_add(rho, idx[c], w[c] * f32(Q))
        return rho, (idx, w)

    def field(rho):
        rho = rho.reshape(NG, NG) * f32(1.0 / (DX * DX)) + f32(1.0)  # plus the ion background
        rho_k = cp.fft.rfft2(rho)
        ex = cp.fft.irfft2(rho_k * gx_spec, s=(NG, NG))
        ey = cp.fft.irfft2(rho_k * gy_spec, s=(NG, NG))
        return cp.stack([ex.ravel(), ey.ravel()], axis=1)             # [cells, 2]

    state = {"x": px, "y": py, "vx": vx, "vy": vy}
    out = {}

    def step():
        x, y = state["x"], state["y"]
        rho, cached = deposit(x, y)
        e = field(rho)
        if args.fused:
            gather_push_kernel(e, inv_dx, np.int32(NG), f32(QM * DT), f32(DT), f32(L),
                               x, y, state["vx"], state["vy"])
        else:
            idx, w = cached
            ep = e[idx[0]] * w[0][:, None]
            for c in range(1, 4):
                ep += e[idx[c]] * w[c][:, None]
            state["x"], state["y"], state["vx"], state["vy"] = push(
                x, y, state["vx"], state["vy"], ep[:, 0], ep[:, 1])
        out["rho"], out["e"] = rho, e

    def host_cic(x, y):
        gx, gy = x * (1.0 / DX), y * (1.0 / DX)
        i, j = np.floor(gx), np.floor(gy)
        fx, fy = gx - i, gy - j
        i, j = i.astype(np.int64) % NG, j.astype(np.int64) % NG
        i1, j1 = (i + 1) % NG, (j + 1) % NG
        return ((j * NG + i, j * NG + i1, j1 * NG + i, j1 * NG + i1),
                ((1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy))

    def check():
        x = cp.asnumpy(state["x"]).astype(np.float64)
        y = cp.asnumpy(state["y"]).astype(np.float64)
        if not (np.isfinite(x).all() and 0 <= x.min() and x.max() <= L and 0 <= y.min()
                and y.max() <= L):
            raise AssertionError("particles left the box or are not finite")
        # deposition against bincount in float64
        idx, w = host_cic(x, y)
        want = sum(np.bincount(idx[c], weights=w[c] * Q, minlength=NG * NG) for c in range(4))
        rho, _ = deposit(state["x"], state["y"])
        got = cp.asnumpy(rho).astype(np.float64)
        err = np.abs(got - want).max() / np.abs(want).max()
        if not err < 1e-4 or not abs(got.sum() - N_PART * Q) < 1e-3 * abs(N_PART * Q):
            raise AssertionError(f"charge density differs from bincount by {err:.3g}")
        # the field against numpy's FFTs
        dens = want.reshape(NG, NG) / (DX * DX) + 1.0
        rk = np.fft.rfft2(dens)
        ex = np.fft.irfft2(rk * cp.asnumpy(gx_spec), s=(NG, NG))
        ey = np.fft.irfft2(rk * cp.asnumpy(gy_spec), s=(NG, NG))
        e = cp.asnumpy(field(rho)).astype(np.float64)
        scale = np.abs(ex).max() + np.abs(ey).max()
        ferr = max(np.abs(e[:, 0] - ex.ravel()).max(), np.abs(e[:, 1] - ey.ravel()).max())
        if not ferr < 1e-3 * scale:
            raise AssertionError(f"field differs from numpy by {ferr / scale:.3g}")

    run(step, name="cupy_pic2d", backend="cupy", args=args,
        variant="fused" if args.fused else "baseline", check=check)


if __name__ == "__main__":
    main()
