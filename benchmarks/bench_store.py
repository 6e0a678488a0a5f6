"""The report store at 10, 100 and 1,000 reports: ingest time, size, query time and memory.

Reports are generated here from one real capture, sample_reports/forms/
forms_app.import.raw.csv (raw page of forms_app.ncu-rep: 9 launches, 20,043 metric values),
each copy a new run: a new process ID (so a new content hash and report id) and labels
``build=<i>``, ``branch=main``. Two ways in:

- "write": the capture is read and analyzed once; each copy goes in with ``store.add_report``
  (one commit per report, as N separate nightly ingests would). This is the store's own cost.
- "ingest": copies are written as files (generated_NNNN.raw.csv) and ``store.ingest`` reads,
  analyzes and writes each (one call for the folder), as ``ncu-advise ingest DIR`` does; then
  the same folder again (everything already stored: hashing only).

Every phase runs in a fresh process, whose peak RSS is reported. Queries go through
``store.query`` (a fresh DuckDB connection each time, as the CLI does); each is run 3 times,
median reported, and EXPLAIN ANALYZE says how many files it read.

Run: nice -n 10 python benchmarks/bench_store.py [--sizes 10 100 1000] [--ingest-max 10]
     [--json benchmarks/results/store.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import platform
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

SOURCE = (Path(__file__).resolve().parent.parent / "sample_reports" / "forms"
          / "forms_app.import.raw.csv")
QUERIES = {
    "count launches": "SELECT count(*) FROM launches",
    "top-kernels (named)": None,
    "trend of one kernel by label": None,
    "one report's metrics": "SELECT metric, value FROM metrics WHERE report_id = '{last}'",
    "one metric in every report": (
        "SELECT report_id, value FROM metrics WHERE metric = 'dram__bytes_read.sum'"),
}


def replicate(source: Path, n: int, folder: Path) -> list[Path]:
    """Write ``n`` copies of a raw-page capture, each with a new process ID (a new run)."""
    header, units, body = source.read_text().split("\n", 2)
    out = []
    for i in range(n):
        pid = 100_000 + i
        text = re.sub(r'(?m)^"(\d+)","\d+",', lambda m, p=pid: f'"{m.group(1)}","{p}",', body)
        path = folder / f"generated_{i:04d}.raw.csv"
        path.write_text(f"{header}\n{units}\n{text}")
        out.append(path)
    return out


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def phase_write(root: str, n: int) -> dict:
    """Add n copies of the pre-read capture, one commit each; per-report times."""
    import ncu_advisor
    from ncu_advisor import store

    report = ncu_advisor.read_report(SOURCE)
    analysis = ncu_advisor.analyze(report)
    base = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    rss_before = _maxrss_mb()
    times = []
    launches = report.launches
    cpu0 = time.process_time()
    for i in range(n):
        report.launches = launches.assign(process_id=100_000 + i)
        t0 = time.perf_counter()
        store.add_report(root, report, analysis, source=f"generated_{i:04d}.raw.csv",
                         content_hash=hashlib.sha256(f"{base}:{i}".encode()).hexdigest(),
                         labels={"build": str(i), "branch": "main"})
        times.append(time.perf_counter() - t0)
    return {"seconds": sum(times), "cpu_s": time.process_time() - cpu0,
            "first10_ms": 1e3 * statistics.mean(times[:10]),
            "last10_ms": 1e3 * statistics.mean(times[-10:]), "rss_before_mb": rss_before,
            "peak_rss_mb": _maxrss_mb()}


def phase_ingest(root: str, folder: str) -> dict:
    """One ingest call over a folder of generated files, as `ncu-advise ingest DIR` does."""
    from ncu_advisor import store

    t0, cpu0 = time.perf_counter(), time.process_time()
    result = store.ingest(root, [folder], labels={"branch": "main"})
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "cpu_s": time.process_time() - cpu0, "added": len(result.added),
            "already": len(result.already),
            "peak_rss_mb": _maxrss_mb()}


def _files_read(root: str, sql: str) -> str:
    from ncu_advisor import store

    plan = store.query(root, "EXPLAIN ANALYZE " + sql).to_pylist()
    text = "\n".join(str(v) for row in plan for v in row.values())
    counts = re.findall(r"Total Files Read:\s*(\d+)", text)
    return "+".join(counts) if counts else "?"


def phase_query(root: str, name: str, sql: str | None, last: str) -> dict:
    """Run one query 3 times (fresh connection each time); median, rows, files read."""
    from ncu_advisor import store

    if sql is None:
        named, params = (("top-kernels", {"limit": 10}) if name.startswith("top")
                         else ("trend", {"kernel": "copy_strided", "label": "build"}))

        def run():
            return store.run_named(root, named, params)
    else:
        sql = sql.format(last=last)

        def run():
            return store.query(root, sql)
    times, cpu = [], []
    for _ in range(3):
        t0, cpu0 = time.perf_counter(), time.process_time()
        table = run()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - cpu0)
    files = "?" if sql is None else _files_read(root, sql)
    return {"median_s": statistics.median(times), "cpu_s": statistics.median(cpu),
            "rows": table.num_rows, "files_read": files,
            "peak_rss_mb": _maxrss_mb()}


def in_child(fn, *args) -> dict:
    """Run a phase in a fresh process (so its peak RSS is its own)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(fn, args)


def store_size(root: Path) -> tuple[int, int]:
    files = list(root.rglob("*.parquet"))
    return sum(p.stat().st_size for p in files), len(files)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--ingest-max", type=int, default=10,
                        help="largest size also ingested from files (read + analyze + write)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = {"source": str(SOURCE.relative_to(SOURCE.parents[2])),
               "python": platform.python_version(), "machine": platform.machine(),
               "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        for n in args.sizes:
            entry: dict = {}
            root = Path(tmp) / f"store_{n}"
            entry["write"] = in_child(phase_write, str(root), n)
            entry["bytes"], entry["parquet_files"] = store_size(root)
            from ncu_advisor import store

            last = store.report_ids(root)[-1]
            entry["queries"] = {name: in_child(phase_query, str(root), name, sql, last)
                                for name, sql in QUERIES.items()}
            if n <= args.ingest_max:
                folder = Path(tmp) / f"files_{n}"
                folder.mkdir()
                replicate(SOURCE, n, folder)
                target = str(Path(tmp) / f"ingested_{n}")
                entry["ingest"] = in_child(phase_ingest, target, str(folder))
                entry["reingest"] = in_child(phase_ingest, target, str(folder))
            results["sizes"][n] = entry
            print(json.dumps({n: entry}), file=sys.stderr, flush=True)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def print_table(results: dict) -> None:
    sizes = results["sizes"]
    print(f"source: {results['source']} (Python {results['python']}, {results['machine']})")
    print("\n| reports | store size | Parquet files | write: CPU (wall) | per report: CPU "
          "| first 10 / last 10 (wall) | peak RSS | ingest files: CPU (wall) | per report: CPU "
          "| peak RSS | re-ingest, all stored (wall) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, e in sizes.items():
        w, k = e["write"], int(n)
        row = (f"| {k:,} | {e['bytes'] / 1e6:.1f} MB | {e['parquet_files']:,} | "
               f"{w['cpu_s']:.1f} s ({w['seconds']:.1f} s) | {w['cpu_s'] / k * 1e3:.0f} ms | "
               f"{w['first10_ms']:.0f} / {w['last10_ms']:.0f} ms | {w['peak_rss_mb']:.0f} MB | ")
        if "ingest" in e:
            i, r = e["ingest"], e["reingest"]
            row += (f"{i['cpu_s']:.1f} s ({i['seconds']:.1f} s) | {i['cpu_s'] / k * 1e3:.0f} ms | "
                    f"{i['peak_rss_mb']:.0f} MB | {r['seconds']:.2f} s |")
        else:
            row += "not run | | | |"
        print(row)
    names = list(next(iter(sizes.values()))["queries"])
    print("\n| query (CPU; wall; rows; files read; peak RSS) | "
          + " | ".join(f"{int(n):,} reports" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name in names:
        cells = []
        for e in sizes.values():
            q = e["queries"][name]
            files = "" if q["files_read"] == "?" else f"; {q['files_read']} files"
            cells.append(f"{q['cpu_s'] * 1e3:.0f} ms; {q['median_s'] * 1e3:.0f} ms; "
                         f"{q['rows']:,} rows{files}; {q['peak_rss_mb']:.0f} MB")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
