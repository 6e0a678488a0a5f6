"""Cost of `ncu-advise analyze` against launches: time, peak memory and output size.

A real raw-page capture is replicated with new IDs (``generate.replicate_raw``) to several
sizes in a temporary folder (deleted afterwards). For each size, three whole processes are
timed and their peak resident memory read from ``wait4``:

* ``python -c 'pandas.read_csv(FILE)'``, the bare baseline;
* ``ncu-advise analyze FILE -f json -o OUT`` (the JSON contract, raw metrics left out);
* ``ncu-advise analyze FILE -o OUT`` (text).

Usage: ``python benchmarks/bench_scale.py --mb 10 40 160 [--json results.json]``.
Run the 1 GB size once, on a quiet machine: ``nice python benchmarks/bench_scale.py --mb 1000``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import replicate_raw  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / "sample_reports" / "forms" / "forms_app.import.raw.csv"


def measure(cmd: list[str]) -> tuple[float, float]:
    """Run a command; return (wall seconds, peak resident memory in MB)."""
    with tempfile.TemporaryFile() as log:  # a file: a full stderr pipe would block the child
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        log.seek(0)
        err = log.read().decode(errors="replace")[-2000:]
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err}")
    return wall, usage.ru_maxrss / 1024  # ru_maxrss is in KB on Linux


def run(source: Path, sizes_mb: list[float], repeats: int, bare_max_mb: float) -> list[dict]:
    """Measure every size; the best of ``repeats`` runs of each command."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="ncu-advise-bench-") as folder:
        for mb in sizes_mb:
            path = Path(folder) / f"generated_raw_{mb:g}mb.csv"
            launches = replicate_raw(source, path, size_bytes=int(mb * 1e6))
            out_json, out_text = Path(folder) / "out.json", Path(folder) / "out.txt"
            commands = {
                "bare": [sys.executable, "-c",
                         "import sys, pandas; pandas.read_csv(sys.argv[1])", str(path)],
                "json": [sys.executable, "-m", "ncu_advisor.cli", "analyze", str(path), "-f",
                         "json", "-o", str(out_json)],
                "text": [sys.executable, "-m", "ncu_advisor.cli", "analyze", str(path), "-o",
                         str(out_text)],
            }
            row = {"file_mb": path.stat().st_size / 1e6, "launches": launches}
            if mb > bare_max_mb:
                # pandas holds every cell of a wide raw page as a Python string: several GB.
                commands.pop("bare")
                row["bare_s"] = row["bare_rss_mb"] = None
            for name, cmd in commands.items():
                best = min((measure(cmd) for _ in range(repeats)), key=lambda r: r[0])
                row[f"{name}_s"], row[f"{name}_rss_mb"] = best
            row["json_mb"] = out_json.stat().st_size / 1e6
            rows.append(row)
            print(format_row(row), flush=True)
            path.unlink()
    return rows


HEADER = ("| file MB | launches | bare read_csv s | analyze JSON s | x bare | analyze text s "
          "| x bare | peak MB bare | peak MB JSON | peak MB text | JSON MB |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def format_row(r: dict) -> str:
    """One markdown table row."""
    bare = r["bare_s"]
    bare_time = "not run" if bare is None else f"{bare:.2f}"
    bare_rss = "-" if bare is None else f"{r['bare_rss_mb']:,.0f}"

    def ratio(seconds: float) -> str:
        return "n/a" if bare is None else f"{seconds / bare:.2f}"

    return (f"| {r['file_mb']:,.1f} | {r['launches']:,} | {bare_time} | {r['json_s']:.2f} "
            f"| {ratio(r['json_s'])} | {r['text_s']:.2f} | {ratio(r['text_s'])} | {bare_rss} "
            f"| {r['json_rss_mb']:,.0f} | {r['text_rss_mb']:,.0f} | {r['json_mb']:,.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--mb", type=float, nargs="+", default=[10, 40, 160])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--bare-max-mb", type=float, default=300,
                        help="skip the bare pandas baseline above this size (memory)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    shown = args.source.relative_to(ROOT) if args.source.is_relative_to(ROOT) else args.source
    print(f"source: {shown}")
    print(HEADER)
    rows = run(args.source, args.mb, args.repeats, args.bare_max_mb)
    if args.json:
        args.json.write_text(json.dumps({"source": str(args.source), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
