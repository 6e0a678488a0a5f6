"""CuPy's built-in kernels (elementwise, reductions, cuBLAS, CUB/Thrust sort, cuFFT, cuRAND),
run once each inside a profiler range after a warm-up."""

import cupy as cp


def work(a, b, m):
    c = a * b + 1.0                       # elementwise (one fused CuPy kernel)
    s = cp.sum(a)                         # full reduction
    cs = cp.sum(m, axis=0)                # column sums of a row-major matrix
    g = m @ m                             # FP32 GEMM through cuBLAS
    srt = cp.sort(a)                      # radix sort
    f = cp.fft.fft(a[: 1 << 22].astype(cp.complex64))
    r = cp.random.standard_normal(1 << 24, dtype=cp.float32)
    am = cp.argmax(a)
    cu = cp.cumsum(a)
    return c, s, cs, g, srt, f, r, am, cu


a = cp.random.standard_normal(1 << 25, dtype=cp.float32)
b = cp.random.standard_normal(1 << 25, dtype=cp.float32)
m = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
work(a, b, m)                             # compile and plan outside the profiled range
cp.cuda.Device().synchronize()
cp.cuda.runtime.profilerStart()
out = work(a, b, m)
cp.cuda.Device().synchronize()
cp.cuda.runtime.profilerStop()
print("cupy_builtins:", float(out[1]), float(out[3][0, 0]), int(out[7]))
