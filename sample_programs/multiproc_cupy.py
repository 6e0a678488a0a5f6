"""Kernels in two processes, for profiling a program whose work runs in a child process.

The parent launches ``parent_scale`` once, then starts itself again as a child (the way Python
launchers start workers), which launches ``child_add`` twice. Profiled with
``--target-processes all`` (ncu's default, and ncu-advise's), all three launches are in the
report; with ``application-only`` only the parent's.
"""

import subprocess
import sys

import cupy as cp

SOURCE = r"""
extern "C" __global__ void parent_scale(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
extern "C" __global__ void child_add(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""
N = 1 << 20


def launch(name: str, times: int) -> None:
    """Launch one kernel of SOURCE ``times`` times on a fresh array."""
    kernel = cp.RawModule(code=SOURCE).get_function(name)
    x = cp.zeros(N, dtype=cp.float32)
    for _ in range(times):
        kernel(((N + 255) // 256,), (256,), (x, cp.int32(N)))
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    if "--child" in sys.argv:
        launch("child_add", 2)
        print("child: 2 launches of child_add")
    else:
        launch("parent_scale", 1)
        print("parent: 1 launch of parent_scale; starting the child")
        subprocess.run([sys.executable, __file__, "--child"], check=True)
