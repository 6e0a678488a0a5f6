"""All-pairs gravitational n-body step in CuPy raw kernels: 16384 bodies, softened forces.

Positions and masses are float4 (x, y, z, m). The accelerations are computed three ways: a
direct loop over all bodies from global memory in float, the same loop with the accumulation
and the distance in double, and a loop over 256-body tiles staged in shared memory with
rsqrtf. A leapfrog kick-drift then advances velocities and positions, and the kinetic energy
is summed with CuPy.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

NBODY_SRC = r"""
#define SOFTENING 1e-3f

extern "C" __global__ void nbody_forces_direct(const float4* __restrict__ pos,
                                               float3* __restrict__ acc, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 pi = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; j++) {
        float4 pj = pos[j];
        float dx = pj.x - pi.x;
        float dy = pj.y - pi.y;
        float dz = pj.z - pi.z;
        float dist = sqrtf(dx * dx + dy * dy + dz * dz + SOFTENING * SOFTENING);
        float s = pj.w / (dist * dist * dist);
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    acc[i] = make_float3(ax, ay, az);
}

// Accumulates in double so that the sum over 16k bodies keeps its low bits.
extern "C" __global__ void nbody_forces_direct_dacc(const float4* __restrict__ pos,
                                                    float3* __restrict__ acc, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 pi = pos[i];
    double ax = 0.0, ay = 0.0, az = 0.0;
    for (int j = 0; j < n; j++) {
        float4 pj = pos[j];
        double dx = pj.x - pi.x;
        double dy = pj.y - pi.y;
        double dz = pj.z - pi.z;
        double dist = sqrt(dx * dx + dy * dy + dz * dz + 1e-6);
        double s = pj.w / (dist * dist * dist);
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    acc[i] = make_float3((float)ax, (float)ay, (float)az);
}

#define TILE 256

extern "C" __global__ void nbody_forces_tiled(const float4* __restrict__ pos,
                                              float3* __restrict__ acc, int n)
{
    __shared__ float4 tile[TILE];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 pi = (i < n) ? pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int base = 0; base < n; base += TILE) {
        int j = base + threadIdx.x;
        tile[threadIdx.x] = (j < n) ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TILE; k++) {
            float4 pj = tile[k];
            float dx = pj.x - pi.x;
            float dy = pj.y - pi.y;
            float dz = pj.z - pi.z;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + SOFTENING * SOFTENING);
            float s = pj.w * inv * inv * inv;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        __syncthreads();
    }
    if (i < n) acc[i] = make_float3(ax, ay, az);
}

// Leapfrog: v += a dt, x += v dt (mass in pos.w untouched).
extern "C" __global__ void leapfrog_kick_drift(float4* __restrict__ pos, float3* __restrict__ vel,
                                               const float3* __restrict__ acc, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float3 a = acc[i];
    float3 v = vel[i];
    v.x += a.x * dt;
    v.y += a.y * dt;
    v.z += a.z * dt;
    float4 p = pos[i];
    p.x += v.x * dt;
    p.y += v.y * dt;
    p.z += v.z * dt;
    vel[i] = v;
    pos[i] = p;
}
"""

N = 16384
BLOCK = 256       # must equal TILE for nbody_forces_tiled
DT = 1e-4
SOFT2 = 1e-6


def host_acc(pos, rows):
    """Accelerations of bodies ``rows`` in float64 on the host."""
    p = pos.astype(np.float64)
    d = p[None, :, :3] - p[rows, None, :3]
    r2 = (d * d).sum(-1) + SOFT2
    s = p[None, :, 3] / (r2 * np.sqrt(r2))
    return (d * s[..., None]).sum(1)


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp

    rng = np.random.default_rng(11)
    mod = cp.RawModule(code=NBODY_SRC)
    direct = mod.get_function("nbody_forces_direct")
    direct_d = mod.get_function("nbody_forces_direct_dacc")
    tiled = mod.get_function("nbody_forces_tiled")
    kick_drift = mod.get_function("leapfrog_kick_drift")

    # A Plummer-like ball: positions inside the unit sphere, masses summing to 1
    host_pos = np.empty((N, 4), np.float32)
    r = rng.random(N) ** (1 / 3)
    v = rng.standard_normal((N, 3))
    host_pos[:, :3] = (v / np.linalg.norm(v, axis=1, keepdims=True) * r[:, None])
    host_pos[:, 3] = rng.random(N) * (2.0 / N)
    pos = cp.asarray(host_pos)                       # (N, 4) is float4 per body
    vel = cp.zeros((N, 3), cp.float32)               # (N, 3) is float3 per body
    acc_direct = cp.empty((N, 3), cp.float32)
    acc_dacc = cp.empty((N, 3), cp.float32)
    acc_tiled = cp.empty((N, 3), cp.float32)
    out = {}
    grid = ((N + BLOCK - 1) // BLOCK,)

    def forces():
        direct(grid, (BLOCK,), (pos, acc_direct, cp.int32(N)))
        direct_d(grid, (BLOCK,), (pos, acc_dacc, cp.int32(N)))
        tiled(grid, (BLOCK,), (pos, acc_tiled, cp.int32(N)))

    def step():
        forces()
        kick_drift(grid, (BLOCK,), (pos, vel, acc_tiled, cp.float32(DT), cp.int32(N)))
        out["ke"] = 0.5 * cp.sum(pos[:, 3] * cp.sum(vel * vel, axis=1))

    def check():
        ke = 0.5 * float((pos[:, 3].get().astype(np.float64)
                          * (vel.get().astype(np.float64) ** 2).sum(1)).sum())
        if not abs(float(out["ke"]) - ke) <= 1e-3 * ke:
            raise AssertionError(f"kinetic energy {float(out['ke'])} vs {ke}")
        forces()                                     # on the current positions
        p0 = pos.get()
        rows = rng.choice(N, 256, replace=False)
        ref = host_acc(p0, rows)
        scale = np.abs(ref).max()
        for name, got in (("nbody_forces_direct", acc_direct),
                          ("nbody_forces_direct_dacc", acc_dacc),
                          ("nbody_forces_tiled", acc_tiled)):
            err = np.abs(got.get()[rows] - ref).max() / scale
            if not err < 1e-3:
                raise AssertionError(f"{name}: relative error {err:.3g}")

    run(step, name="cuda_nbody", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
