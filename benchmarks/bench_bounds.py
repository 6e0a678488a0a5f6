"""Issue 25's bounds: peak memory of 1 GB inputs (HTML included) and folders of many files.

Inputs are generated from real captures in a temporary folder (deleted afterwards), as
BENCHMARKS.md's "Details pages, text output and HTML at 150 MB and 1 GB" made them:

* ``--mb``: the details page (``replicate_details`` of ``forms_app.import.details.csv``), the
  text output (``replicate_text`` of ``forms_app.live.full.txt``) and the raw page
  (``replicate_raw`` of ``forms_app.import.raw.csv``), each analyzed to JSON and to HTML;
* ``--files``: a folder of one-launch raw exports (``one_launch_files``), analyzed to JSON.

Each cell is one whole process, its peak resident memory from ``wait4``; a peak above
``--bound-mb`` (2,000: "below 2 GB for any input of 1 GB") is marked ``OVER``.

Usage: ``python benchmarks/bench_bounds.py --mb 1000 --forms details text --formats json html``
or ``python benchmarks/bench_bounds.py --files 1000 2000 10000`` (minutes each on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import measure  # noqa: E402
from generate import (  # noqa: E402
    one_launch_files,
    replicate_details,
    replicate_raw,
    replicate_text,
)

FORMS = Path(__file__).resolve().parent.parent / "sample_reports" / "forms"
SOURCES = {
    "details": (replicate_details, FORMS / "forms_app.import.details.csv", "csv"),
    "text": (replicate_text, FORMS / "forms_app.live.full.txt", "txt"),
    "raw": (replicate_raw, FORMS / "forms_app.import.raw.csv", "csv"),
}


def _analyze(path: Path, fmt: str, out: Path) -> tuple[float, float]:
    return measure([sys.executable, "-m", "ncu_advisor.cli", "analyze", str(path), "-f", fmt,
                    "-o", str(out)])


def _row(what: str, fmt: str, wall: float, peak_mb: float, bound: float) -> str:
    mark = "OVER" if peak_mb > bound else "ok"
    return f"| {what} | {fmt} | {wall:.1f} s | {peak_mb * 1024:,.0f} KB | {mark} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="*", default=[])
    parser.add_argument("--forms", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    parser.add_argument("--formats", nargs="+", default=["json", "html"])
    parser.add_argument("--files", type=int, nargs="*", default=[])
    parser.add_argument("--bound-mb", type=float, default=2000)
    args = parser.parse_args()
    print("| input | output | wall | peak RSS | below bound |\n|---|---|---:|---:|---|")
    with tempfile.TemporaryDirectory(prefix="ncu-advise-bounds-") as tmp:
        folder = Path(tmp)
        for mb in args.mb:
            for form in args.forms:
                make, src, ext = SOURCES[form]
                path = folder / f"generated_{form}_{mb:g}mb.{ext}"
                make(src, path, size_bytes=int(mb * 1e6))
                for fmt in args.formats:
                    wall, peak = _analyze(path, fmt, folder / f"out.{fmt}")
                    print(_row(f"{form} {path.stat().st_size:,} B", fmt, wall, peak,
                               args.bound_mb), flush=True)
                path.unlink()
        for n in args.files:
            path = folder / f"generated_{n}_files"
            one_launch_files(FORMS / "forms_app.import.raw.csv", path, files=n)
            wall, peak = _analyze(path, "json", folder / "out.json")
            print(_row(f"folder of {n:,} one-launch raw exports", "json", wall, peak,
                       args.bound_mb), flush=True)
            for f in path.iterdir():
                f.unlink()
            path.rmdir()


if __name__ == "__main__":
    main()
