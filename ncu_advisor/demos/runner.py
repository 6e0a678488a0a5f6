"""Running the demo pairs on a GPU with CuPy: check, time, and run once for ncu.

Running a demo imports CuPy lazily and raises :class:`~ncu_advisor.errors.DemoError` with a
one-line message when CuPy or a GPU is missing, the name is unknown, or a kernel returns a wrong
result.

Timing follows the usual method: check both results against the reference first, warm up, time
every launch on its own with CUDA events, rotate input sets so consecutive runs cannot reuse the
L2 cache, and report the median with its spread.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from ..errors import DemoError
from .catalogue import Demo, Variant, get_demo, list_demos

_NO_CUPY = "CuPy is not installed: pip install 'ncu-advise[gpu]'"
_TIMING_SCHEMA = "ncu-advise-demo-timing/1"
# The timing table: a header, then one row per demo (time_all's log lines).
TABLE_HEADER = f"{'demo':<15} {'bad ms':>9} {'good ms':>9} {'speedup':>8} {'GB/s':>8} {'% roof':>7}"


def require_gpu() -> ModuleType:
    """Import CuPy and check that a CUDA device is usable.

    Returns:
        The ``cupy`` module.

    Raises:
        DemoError: If CuPy is not installed or no CUDA device can be used.

    """
    try:
        import cupy
    except ImportError:
        raise DemoError(_NO_CUPY) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError, or a missing driver library
        raise DemoError(f"no usable CUDA GPU: {exc}") from None
    if count < 1:
        raise DemoError("no CUDA GPU found")
    return cupy


_LAUNCHERS: dict[str, ModuleType] = {}


def load_launcher(demo: Demo) -> ModuleType:
    """Import the demo's ``launch.py`` (which imports CuPy) and return the module.

    Raises:
        DemoError: If CuPy or a GPU is missing, or the launcher lacks a required name.

    """
    require_gpu()
    if demo.name in _LAUNCHERS:
        return _LAUNCHERS[demo.name]
    module_name = "ncu_advisor._demo_" + demo.name.replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, demo.launch_path)
    if spec is None or spec.loader is None:
        raise DemoError(f"demo {demo.name!r}: cannot load {demo.launch_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    needed = ["setup", "reference", "work", "TOLERANCE"] + [v.run for v in demo.variants]
    missing = [n for n in needed if not hasattr(module, n)]
    if missing:
        raise DemoError(f"demo {demo.name!r}: {demo.launch_path} lacks {', '.join(missing)}")
    _LAUNCHERS[demo.name] = module
    return module


def _runner(launcher: ModuleType, variant: Variant) -> Callable[[dict[str, Any], int], Any]:
    return getattr(launcher, variant.run)


def _compare(cp: ModuleType, out: Any, ref: Any, rtol: float, atol: float) -> tuple[bool, float]:
    """Compare in float64; return (within tolerance, max absolute error)."""
    got = cp.asarray(out).astype(cp.float64).ravel()
    want = cp.asarray(ref).astype(cp.float64).ravel()
    if got.shape != want.shape:
        return False, math.inf
    err = cp.abs(got - want)
    ok = bool(cp.all(err <= atol + rtol * cp.abs(want)))  # False on any NaN
    max_err = float(err.max()) if err.size else 0.0
    return ok, max_err


def _verify(demo: Demo, launcher: ModuleType, state: dict[str, Any]) -> dict[str, float]:
    """Run every variant once on input set 0 and check it against the reference."""
    cp = require_gpu()
    tol = launcher.TOLERANCE
    rtol, atol = float(tol["rtol"]), float(tol["atol"])
    ref = launcher.reference(state, 0)
    errors: dict[str, float] = {}
    for variant in demo.variants:
        out = _runner(launcher, variant)(state, 0)
        cp.cuda.Device().synchronize()
        ok, max_err = _compare(cp, out, ref, rtol, atol)
        if not ok:
            raise DemoError(
                f"demo {demo.name!r}: the {variant.role} variant ({variant.label}) does not match "
                f"the reference (max abs error {max_err:.3g}; rtol={rtol:g}, atol={atol:g})"
            )
        errors[variant.role if variant.role != "extra" else variant.label] = max_err
    del ref
    return errors


def _free(cp: ModuleType) -> None:
    cp.cuda.Device().synchronize()
    cp.get_default_memory_pool().free_all_blocks()


def check_demo(name: str, size: str = "default") -> dict[str, float]:
    """Set a demo up and check every variant against its reference.

    Args:
        name: The demo name.
        size: ``"default"`` (the profiled size) or ``"small"`` (quick tests).

    Returns:
        The maximum absolute error of each variant, keyed by role (extras by label).

    Raises:
        DemoError: On a missing GPU or CuPy, an unknown name, or a wrong result.

    """
    demo = get_demo(name)
    launcher = load_launcher(demo)
    cp = require_gpu()
    state = launcher.setup(size)
    try:
        return _verify(demo, launcher, state)
    finally:
        del state
        _free(cp)


def _time_variant(
    cp: ModuleType,
    run: Callable[[dict[str, Any], int], Any],
    state: dict[str, Any],
    repeats: int,
    warmup: int,
) -> list[float]:
    """Time single runs with CUDA events, rotating the input sets; return milliseconds."""
    num_bufs = int(state.get("num_bufs", 1))
    for i in range(max(warmup, num_bufs)):
        run(state, i % num_bufs)
    starts = [cp.cuda.Event() for _ in range(repeats)]
    ends = [cp.cuda.Event() for _ in range(repeats)]
    for i in range(repeats):
        starts[i].record()
        run(state, i % num_bufs)
        ends[i].record()
    ends[-1].synchronize()
    return [cp.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends, strict=True)]


def _stats(
    times_ms: Sequence[float], nbytes: float, flops: float, roof_gbs: float | None
) -> dict[str, Any]:
    import numpy as np

    t = np.asarray(times_ms, dtype=np.float64)
    median = float(np.median(t))
    p10, q1, q3, p90 = (float(v) for v in np.percentile(t, [10, 25, 75, 90]))
    seconds = median * 1e-3
    gbs = nbytes / seconds / 1e9 if seconds > 0 else math.nan
    return {
        "median_ms": median,
        "p10_ms": p10,
        "p90_ms": p90,
        "q1_ms": q1,
        "q3_ms": q3,
        "min_ms": float(t.min()),
        "max_ms": float(t.max()),
        "runs": len(t),
        "bytes": nbytes,
        "flops": flops,
        "gbs": gbs,
        "gflops": flops / seconds / 1e9 if seconds > 0 else math.nan,
        "pct_of_roof": 100.0 * gbs / roof_gbs if roof_gbs else None,
    }


def time_demo(
    name: str,
    repeats: int = 50,
    warmup: int = 5,
    *,
    size: str = "default",
    copy_roof_gbs: float | None = None,
) -> dict[str, Any]:
    """Check a demo's results, then time each variant.

    Effective bandwidth and FLOP rate come from the launcher's ``work()``: ``bytes`` and ``flops``
    are the minimum the good variant must move and compute; ``bad_bytes`` / ``bad_flops``, when
    present, are the bad algorithm's own minimum (e.g. the three passes of an unfused chain).

    Args:
        name: The demo name.
        repeats: Timed runs per variant (each launch timed on its own).
        warmup: Untimed runs per variant before timing.
        size: Problem size preset of the launcher (``"default"`` or ``"small"``).
        copy_roof_gbs: Measured device copy bandwidth, for the percent-of-roof columns.

    Returns:
        Medians, spreads, effective GB/s and GFLOP/s per variant, the speedup
        (bad median / good median) and the maximum errors of the correctness check.

    Raises:
        DemoError: On a missing GPU or CuPy, an unknown name, or a wrong result.

    """
    if repeats < 1:
        raise DemoError("repeats must be at least 1")
    demo = get_demo(name)
    launcher = load_launcher(demo)
    cp = require_gpu()
    state = launcher.setup(size)
    try:
        errors = _verify(demo, launcher, state)
        work = launcher.work(state)
        result: dict[str, Any] = {
            "name": demo.name,
            "category": demo.category,
            "title": demo.title,
            "problem": demo.problem,
            "size": size,
            "num_bufs": int(state.get("num_bufs", 1)),
            "work": work,
            "max_abs_error": errors,
            "variants": {},
        }
        for variant in demo.variants:
            times = _time_variant(cp, _runner(launcher, variant), state, repeats, warmup)
            nbytes = float(work.get("bad_bytes", work["bytes"]))
            flops = float(work.get("bad_flops", work["flops"]))
            if variant.role != "bad":
                nbytes, flops = float(work["bytes"]), float(work["flops"])
            stats = _stats(times, nbytes, flops, copy_roof_gbs)
            stats.update(label=variant.label, kernels=list(variant.kernels))
            key = variant.role if variant.role != "extra" else variant.label
            result["variants"][key] = stats
        bad, good = result["variants"]["bad"], result["variants"]["good"]
        result["bad"], result["good"] = bad, good
        result["speedup"] = bad["median_ms"] / good["median_ms"]
        return result
    finally:
        del state
        _free(cp)


def measure_copy_roof(nbytes: int = 2 << 30, repeats: int = 10) -> float:
    """Measure device-to-device copy bandwidth in GB/s (bytes read + bytes written).

    Args:
        nbytes: Size of the copied buffer (default 2 GiB, far above the L2).
        repeats: Timed copies; the median is reported.

    Returns:
        The median copy bandwidth in GB/s (1e9 bytes per second), counting read and write.

    """
    cp = require_gpu()
    src = cp.empty(nbytes, dtype=cp.uint8)
    src.fill(1)
    dst = cp.empty_like(src)
    try:
        for _ in range(2):
            dst.data.copy_from_device_async(src.data, nbytes)
        times = []
        for _ in range(repeats):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            dst.data.copy_from_device_async(src.data, nbytes)
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        times.sort()
        median_ms = times[len(times) // 2]
        return 2.0 * nbytes / (median_ms * 1e-3) / 1e9
    finally:
        del src, dst
        _free(cp)


def _gpu_info(cp: ModuleType) -> dict[str, Any]:
    device = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(device.id)
    name = props.get("name", b"")
    return {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "cc": f"{props.get('major', '?')}.{props.get('minor', '?')}",
        "sm_count": props.get("multiProcessorCount"),
        "l2_bytes": props.get("l2CacheSize"),
        "memory_bytes": props.get("totalGlobalMem"),
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "cuda_driver": cp.cuda.runtime.driverGetVersion(),
        "cupy": cp.__version__,
    }


def time_all(
    names: Sequence[str] | None = None,
    repeats: int = 50,
    warmup: int = 5,
    *,
    size: str = "default",
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure the copy roof, then check and time every demo (or the given ones).

    A demo that fails (wrong result, or any error while compiling or launching) is recorded
    under ``errors`` and the others still run.

    Returns:
        A JSON-ready dict: GPU facts, the copy roof, one result per demo, and the errors.

    """
    cp = require_gpu()
    names = list(names) if names else [d.name for d in list_demos()]
    say = log or (lambda _msg: None)
    roof = measure_copy_roof()
    say(f"device copy roof: {roof:,.0f} GB/s")
    report: dict[str, Any] = {
        "schema": _TIMING_SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "gpu": _gpu_info(cp),
        "copy_roof_gbs": roof,
        "repeats": repeats,
        "warmup": warmup,
        "size": size,
        "demos": [],
        "errors": [],
    }
    for name in names:
        started = time.perf_counter()
        try:
            result = time_demo(name, repeats, warmup, size=size, copy_roof_gbs=roof)
        except Exception as exc:  # one broken demo must not stop the batch
            message = str(exc) if isinstance(exc, DemoError) else f"{type(exc).__name__}: {exc}"
            report["errors"].append({"name": name, "error": message})
            say(f"{name}: FAILED: {message}")
            _free(cp)
            continue
        result["wall_s"] = time.perf_counter() - started
        report["demos"].append(result)
        say(_row(result))
    return report


def profile_once(name: str, size: str = "default") -> list[str]:
    """Run each variant once inside a ``cudaProfilerStart``/``Stop`` range.

    Meant for ``ncu --profile-from-start off --nvtx``: setup, compilation, reference data and
    one warm-up run of every variant happen outside the range, so the profile holds exactly
    the bad launches, then the good ones, then any extras, in that order, each variant in an
    NVTX range named ``DEMO/ROLE:FUNCTION`` (``math-rewrite/bad:run_bad``).

    Returns:
        The kernel names launched inside the profiled range, in order.

    """
    demo = get_demo(name)
    launcher = load_launcher(demo)
    cp = require_gpu()
    state = launcher.setup(size)
    try:
        for variant in demo.variants:
            _runner(launcher, variant)(state, 0)
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.start()
        try:
            for variant in demo.variants:
                # One NVTX range per variant (``ncu --nvtx`` records it): the variants are
                # alternatives, not steps of one computation, and the range says so to a
                # reader of the report and to the chain rules, which do not link launches
                # across ranges.
                cp.cuda.nvtx.RangePush(f"{demo.name}/{variant.role}:{variant.run}")
                try:
                    _runner(launcher, variant)(state, 0)
                finally:
                    cp.cuda.nvtx.RangePop()
            cp.cuda.Device().synchronize()
        finally:
            cp.cuda.profiler.stop()
        return list(demo.kernel_names)
    finally:
        del state
        _free(cp)


def _row(result: dict[str, Any]) -> str:
    """Format one table row (plus one line per extra variant)."""
    good = result["good"]
    roof = good.get("pct_of_roof")
    lines = [
        f"{result['name']:<15} {result['bad']['median_ms']:>9.4f} {good['median_ms']:>9.4f} "
        f"{result['speedup']:>7.2f}x {good['gbs']:>8.0f} "
        f"{'' if roof is None else f'{roof:.0f}':>7}"
    ]
    for label, extra in result["variants"].items():
        if label not in ("bad", "good"):
            lines.append(f"  + {label}: {extra['median_ms']:.4f} ms, {extra['gbs']:.0f} GB/s")
    return "\n".join(lines)
