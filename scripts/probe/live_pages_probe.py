"""Probe (GPU machine): can the profiling run print a CSV page itself, beside its .ncu-rep?

Issue 24's fixed cost is mostly ncu loading the report again to export it (0.61-0.63 s a
page). If ``ncu ... --csv --page raw --log-file F -o REP`` writes the page into F while it
profiles, the wrapper needs no export for that page. Runs the wrapper's own ncu command on
the coalescing demo with and without a live page, 3 alternated rounds, then exports the
report as the wrapper does today, and records: wall times, whether each log holds a CSV
page, its rows, whether the live raw page equals the exported one (cells), and whether the
live details page holds ncu's rule rows and ncu-advise's own section metrics.

Usage: python3 scripts/probe/live_pages_probe.py OUT_DIR
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ncu_advisor.profiling.command import build_import_command, build_ncu_command
from ncu_advisor.profiling.sections import ADVISOR_SET

APP = [sys.executable, "-m", "ncu_advisor.demos", "once", "coalescing"]


def profile(ncu: str, out: Path, tag: str, page: str | None) -> dict:
    rep, log = out / f"{tag}", out / f"{tag}.log"
    cmd = build_ncu_command(ncu, APP[0], APP[1:], rep_path=rep, section_set=ADVISOR_SET,
                            extra=["--profile-from-start", "off"], log_file=log)
    if page is not None:  # before -o: the live page options
        at = cmd.index("-o")
        cmd[at:at] = ["--csv", "--page", page, "--print-units", "base"]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - started
    text = log.read_text(errors="replace") if log.exists() else ""
    rows = [line for line in text.splitlines() if line.startswith('"')]
    return {"tag": tag, "page": page, "rc": done.returncode, "wall_s": round(wall, 3),
            "rep_exists": Path(f"{rep}.ncu-rep").exists(), "csv_lines": len(rows),
            "log_bytes": len(text), "stderr_tail": done.stderr[-300:], "cmd": cmd}


def export(ncu: str, rep: Path, page: str | None, dest: Path) -> float:
    started = time.monotonic()
    with dest.open("w") as fh:
        subprocess.run(build_import_command(ncu, rep, page=page), stdout=fh, check=False)
    return time.monotonic() - started


def csv_rows(path: Path) -> list[list[str]]:
    lines = [line for line in path.read_text(errors="replace").splitlines()
             if line.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu") or "ncu"
    runs = []
    for rnd in range(3):
        for page in (None, "raw", "details"):
            tag = f"r{rnd}_{page or 'none'}"
            runs.append(profile(ncu, out, tag, page))
            print(json.dumps({k: v for k, v in runs[-1].items() if k != "cmd"}), flush=True)
    exports = []
    for rnd in range(3):
        rep = out / f"r{rnd}_none.ncu-rep"
        for page in ("raw", None):
            dest = out / f"r{rnd}_export_{page or 'details'}.csv"
            exports.append({"round": rnd, "page": page or "details",
                            "wall_s": round(export(ncu, rep, page, dest), 3)})
            print(json.dumps(exports[-1]), flush=True)
    # The live raw page against the exported raw page of the same run's report.
    live_raw = csv_rows(out / "r0_raw.log")
    exported_raw = out / "r0_raw_export.csv"
    export(ncu, out / "r0_raw.ncu-rep", "raw", exported_raw)
    exp_raw = csv_rows(exported_raw)
    same_header = bool(live_raw) and bool(exp_raw) and live_raw[0] == exp_raw[0]
    cells = sum(len(r) for r in exp_raw)
    # Pages of different lengths are compared over their common rows and cells.
    equal = sum(a == b for ra, rb in zip(live_raw, exp_raw, strict=False)
                for a, b in zip(ra, rb, strict=False))
    live_details = (out / "r0_details.log").read_text(errors="replace")
    summary = {
        "runs": [{k: v for k, v in r.items() if k != "cmd"} for r in runs],
        "exports": exports,
        "cmd_example": runs[1]["cmd"],
        "live_raw_rows": len(live_raw), "exported_raw_rows": len(exp_raw),
        "raw_same_header": same_header, "raw_cells": cells, "raw_cells_equal": equal,
        "live_details_has_rules": '"Rule Name"' in live_details or "OPT" in live_details,
        "live_details_has_ncuadvise": "NcuAdvise" in live_details,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    for path in out.glob("*.ncu-rep"):
        path.unlink()
    print(json.dumps({k: v for k, v in summary.items() if k not in ("runs", "exports")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
