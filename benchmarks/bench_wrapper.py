"""The wrapper's own steps after ncu (export, read, analyze, render), without a GPU.

``ncu-advise ./app`` runs ncu, then exports, reads, analyses and renders; issue 24 asks for
those steps to take at most 0.5 s on a 7-kernel program. This runs the real command against
the test double ``tests/fake_ncu/ncu`` (it answers with forms_app's real 9-launch capture),
slowed with ``FAKE_NCU_DELAY`` so that "ncu" runs long enough for the wrapper's warm-up to
hide behind it as it does on a GPU, and prints each step of ``session.timings_s`` (median and
range over the repetitions, each in a fresh process). The fake's export is a copy of two
files, not ncu's ``--import`` (0.7-0.9 s on the H200): ``export`` here is the wrapper's side
of it only; ``scripts/gpu_overhead.sh`` measures the real one.

It also times ``ncu-advise analyze`` of the same pages per output format (wall clock of the
whole command, Python start-up included), to show what each format loads.

Usage: ``python benchmarks/bench_wrapper.py [--repeat 5] [--delay 0.1] [--profile-args=--no-html]
[--compare ../main]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAKE_NCU = ROOT / "tests" / "fake_ncu" / "ncu"
FORMS = ROOT / "sample_reports" / "forms"
PAGES = [FORMS / "forms_app.import.raw.base.csv", FORMS / "forms_app.import.details.base.csv"]
STEPS = ("export", "load", "read", "analyze", "render", "text")


def profile_once(work: Path, delay: float, extra: list[str],
                 tree: Path | None = None) -> dict[str, float]:
    """One ``ncu-advise --all-launches`` run under the fake ncu; its ``timings_s`` and wall.

    ``tree``: another checkout whose ``ncu_advisor`` to run (first on ``PYTHONPATH``).
    """
    out = work / "report"
    env = {**os.environ, "NCU": str(FAKE_NCU), "FAKE_NCU_DELAY": str(delay)}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    env.pop("FAKE_NCU_MODE", None)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ncu_advisor.cli", "-o", str(out),
                           "--all-launches", *extra, "/bin/true"], env=env, cwd=work,
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"ncu-advise failed ({proc.returncode}):\n{proc.stderr}")
    timings = json.loads((out / "report.json").read_text())["session"]["timings_s"]
    timings["wall"] = wall
    timings["after_ncu"] = sum(v for k, v in timings.items()
                               if k not in ("ncu", "census", "wall"))
    # What the whole command took beyond ncu: Python's start, the CLI, writing the files.
    timings["wall_minus_ncu"] = wall - timings["ncu"] - timings.get("census", 0.0)
    return timings


def print_runs(title: str, runs: list[dict[str, float]]) -> None:
    print(title)
    keys = [k for k in ("ncu", *STEPS, "after_ncu", "wall_minus_ncu", "wall") if k in runs[0]]
    keys += [k for k in runs[0] if k not in keys]
    for key in keys:
        print(f"  {key:14s} {summary([r.get(key, 0.0) for r in runs])}")


def analyze_once(fmt: str) -> float:
    """Wall seconds of ``ncu-advise analyze PAGES -f FMT`` (output thrown away)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "ncu_advisor.cli", "analyze", *map(str, PAGES),
                    "-f", fmt], capture_output=True, check=True)
    return time.monotonic() - started


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.3f}  ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    """Print the wrapper's steps and ``analyze``'s wall time per format."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.1,
                        help="FAKE_NCU_DELAY: 27x this is the fake ncu's run (9 kernels)")
    parser.add_argument("--profile-args", nargs="*", default=[],
                        help="more ncu-advise options, e.g. --no-html")
    parser.add_argument("--no-analyze", action="store_true", help="skip the analyze timings")
    parser.add_argument("--compare", type=Path, metavar="TREE",
                        help="another checkout (e.g. a git worktree of main): its runs "
                        "alternate with this one's, same machine load for both")
    opts = parser.parse_args()

    runs: list[dict[str, float]] = []
    other: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-wrapper-") as tmp:
        for _ in range(opts.repeat):
            if opts.compare is not None:
                other.append(profile_once(Path(tmp), opts.delay, [], opts.compare.resolve()))
            runs.append(profile_once(Path(tmp), opts.delay, opts.profile_args))
    what = (f"ncu-advise --all-launches {' '.join(opts.profile_args)} /bin/true under the fake "
            f"ncu (9 launches of forms_app), {opts.repeat} runs: median (min-max) s")
    if other:
        print_runs(f"{opts.compare} (alternating): {what.replace(' '.join(opts.profile_args), '')}",
                   other)
    print_runs(f"{ROOT}: {what}", runs)
    if opts.no_analyze:
        return
    print(f"ncu-advise analyze (raw + details pages of forms_app), {opts.repeat} runs, wall s")
    for fmt in ("text", "json", "html"):
        print(f"  -f {fmt:7s} {summary([analyze_once(fmt) for _ in range(opts.repeat)])}")


if __name__ == "__main__":
    main()
