"""What every corpus program shares: profile one step, or time it.

Each program builds its inputs, defines ``step()`` (the work of one iteration, GPU launches
only, no host synchronisation inside unless the real program would have one) and calls
``run(step, name=..., backend=...)``. Two modes:

- default: warm up (compilation, library heuristics, caches), then one step between
  ``cudaProfilerStart``/``Stop`` inside an NVTX range named after the program, so that
  ``ncu --profile-from-start off`` captures exactly one step;
- ``--time N``: no profiler; N timed steps after the warm-up, with CUDA events, and one JSON
  line on stdout (median, p10, p90 in ms) for comparing a program with its fixed variant.

Programs with a fixed variant take the flag for it themselves and pass ``variant=`` here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# "cpu" runs a PyTorch program without a GPU (a dry run that checks shapes, not a capture).
DEV = os.environ.get("CORPUS_DEVICE", "cuda")


def parser(doc: str | None = None) -> argparse.ArgumentParser:
    """An argument parser with the shared ``--time`` and ``--warmup`` options."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--time", type=int, default=0, metavar="N",
                   help="time N steps instead of profiling one")
    p.add_argument("--warmup", type=int, default=3, help="steps before profiling or timing")
    return p


class _Torch:
    def __init__(self):
        import torch

        self.t = torch

    def sync(self):
        self.t.cuda.synchronize()

    def start(self):
        self.t.cuda.profiler.start()

    def stop(self):
        self.t.cuda.profiler.stop()

    def push(self, name):
        self.t.cuda.nvtx.range_push(name)

    def pop(self):
        self.t.cuda.nvtx.range_pop()

    def event(self):
        e = self.t.cuda.Event(enable_timing=True)
        e.record()
        return e

    @staticmethod
    def elapsed(a, b):
        return a.elapsed_time(b)


class _TorchCPU(_Torch):
    def sync(self):
        pass

    start = stop = push = pop = lambda self, *a: None

    def event(self):
        return time.perf_counter()

    @staticmethod
    def elapsed(a, b):
        return (b - a) * 1e3


class _CuPy:
    def __init__(self):
        import cupy

        self.cp = cupy

    def sync(self):
        self.cp.cuda.Device().synchronize()

    def start(self):
        self.cp.cuda.runtime.profilerStart()

    def stop(self):
        self.cp.cuda.runtime.profilerStop()

    def push(self, name):
        self.cp.cuda.nvtx.RangePush(name)

    def pop(self):
        self.cp.cuda.nvtx.RangePop()

    def event(self):
        e = self.cp.cuda.Event()
        e.record()
        return e

    def elapsed(self, a, b):
        b.synchronize()
        return self.cp.cuda.get_elapsed_time(a, b)


def run(step, *, name: str, backend: str, args: argparse.Namespace,
        variant: str = "baseline", check=None) -> None:
    """Warm up, then profile one step or time ``args.time`` steps (see the module doc)."""
    if backend == "torch":
        gpu = _Torch() if DEV == "cuda" else _TorchCPU()
    else:
        gpu = _CuPy()
    for _ in range(args.warmup):
        step()
    gpu.sync()
    if check is not None:
        check()  # raises if the program computes the wrong thing
    if args.time:
        times = []
        for _ in range(args.time):
            a = gpu.event()
            step()
            b = gpu.event()
            gpu.sync()
            times.append(gpu.elapsed(a, b))
        times.sort()
        q = statistics.quantiles(times, n=10) if len(times) >= 2 else [times[0]] * 9
        print(json.dumps({"program": name, "variant": variant, "steps": len(times),
                          "median_ms": statistics.median(times), "p10_ms": q[0],
                          "p90_ms": q[-1]}))
        return
    gpu.start()
    gpu.push(name)
    step()
    gpu.pop()
    gpu.sync()
    gpu.stop()
    print(f"{name} ({variant}): one step profiled", file=sys.stderr)
