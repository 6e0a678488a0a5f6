"""Reading speed: `ncu-advise analyze` vs a bare pandas.read_csv of a 30 MB details export.

The input is generated here from a real capture: sample_reports/forms/
forms_app.import.details.all.csv.gz (`ncu --import --csv --print-details all`, 4.5 MB, 9 launches)
is repeated with renumbered launch IDs until it reaches the target size, and written to a temp
folder as generated_details_all_30mb.csv. Run: python benchmarks/bench_read.py [--mb 30]
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import pandas as pd

from ncu_advisor import analyze, read_report

SOURCE = (Path(__file__).resolve().parent.parent / "sample_reports" / "forms"
          / "forms_app.import.details.all.csv.gz")


def make_input(folder: Path, mb: float) -> Path:
    """Repeat the real capture's launches, renumbering IDs, until the file has ``mb`` MB."""
    text = SOURCE.read_text()
    header, _, body = text.partition("\n")
    out = folder / f"generated_details_all_{mb:.0f}mb.csv"
    parts, size, copy = [header + "\n"], len(header), 0
    while size < mb * 1e6:
        shifted = re.sub(r'(?m)^"(\d+)","',
                         lambda m, c=copy: f'"{int(m.group(1)) + 9 * c}","', body)
        parts.append(shifted)
        size += len(shifted)
        copy += 1
    out.write_text("".join(parts))
    return out


def best_of(fn, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = make_input(Path(tmp), args.mb)
        size_mb = path.stat().st_size / 1e6
        bare, bare_all = best_of(lambda: pd.read_csv(path, on_bad_lines="skip"), args.repeats)
        read, read_all = best_of(lambda: read_report(path), args.repeats)
        full, full_all = best_of(lambda: analyze(read_report(path)).to_dict(), args.repeats)
        proc, proc_all = best_of(lambda: subprocess.run(
            [sys.executable, "-c", "import sys, pandas as pd; "
             "pd.read_csv(sys.argv[1], on_bad_lines='skip')", str(path)],
            check=True, capture_output=True), args.repeats)
        cli, cli_all = best_of(lambda: subprocess.run(
            [sys.executable, "-m", "ncu_advisor.cli", "analyze", str(path), "-f", "json",
             "-o", str(Path(tmp) / "out.json")], check=True, capture_output=True), args.repeats)
        tracemalloc.start()
        report = read_report(path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        launches = len(report.launches)
    print(f"input: {path.name}, {size_mb:.1f} MB, {launches} launches")
    print(f"{'step':<44} {'best s':>7} {'median s':>9} {'x bare':>7}")
    for name, best, all_ in (
        ("pandas.read_csv (bare, on_bad_lines=skip)", bare, bare_all),
        ("ncu_advisor.read_report", read, read_all),
        ("read_report + analyze + to_dict", full, full_all),
    ):
        print(f"{name:<44} {best:7.2f} {statistics.median(all_):9.2f} {best / bare:7.2f}")
    print("whole processes (interpreter start and imports included):")
    print(f"{'step':<44} {'best s':>7} {'median s':>9} {'x bare':>7}")
    for name, best, all_ in (
        ("python -c 'pandas.read_csv(FILE)'", proc, proc_all),
        ("`ncu-advise analyze FILE -f json -o ...`", cli, cli_all),
    ):
        print(f"{name:<44} {best:7.2f} {statistics.median(all_):9.2f} {best / proc:7.2f}")
    print(f"peak Python memory while reading: {peak / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
