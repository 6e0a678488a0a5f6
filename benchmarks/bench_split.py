"""Where one `ncu-advise analyze -f json` of a raw export spends its time and memory.

Runs the steps of the CLI in one process on a generated raw export (a real capture
replicated with new IDs, in a temp folder) and prints each step's seconds and the resident
set after it (``/proc/self/status``, Linux).

Usage: ``python benchmarks/bench_split.py --mb 80``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import replicate_raw  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / "sample_reports" / "forms" / "forms_app.import.raw.csv"


def rss_mb() -> int:
    with open("/proc/self/status") as fh:
        return int(fh.read().split("VmRSS:")[1].split()[0]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--mb", type=float, default=80)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ncu-advise-split-") as folder:
        path = Path(folder) / f"generated_raw_{args.mb:g}mb.csv"
        launches = replicate_raw(args.source, path, size_bytes=int(args.mb * 1e6))
        print(f"{path.stat().st_size / 1e6:.1f} MB, {launches:,} launches; rss {rss_mb()} MB")
        start = time.perf_counter()
        from ncu_advisor import analyze, read_report
        from ncu_advisor.analysis.metric_use import analysis_metrics, lean_reading

        steps = [("imports", lambda: None), ("analysis_metrics", analysis_metrics)]
        state: dict = {}
        steps += [
            ("read_report", lambda: state.update(report=read_report(
                path, **lean_reading()))),
            ("analyze", lambda: state.update(result=analyze(state["report"]))),
            ("write_json", lambda: state["result"].write_json(open(Path(folder) / "out.json",
                                                                   "wb"))),
        ]
        for name, step in steps:
            step()
            now = time.perf_counter()
            print(f"{name:17} {now - start:6.2f} s  rss {rss_mb():5} MB")
            start = now
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"peak rss {peak} MB")


if __name__ == "__main__":
    main()
