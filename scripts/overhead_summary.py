"""Summarise scripts/gpu_overhead.sh: the wrapper's own steps against ncu's time (issue 24).

Reads the work folder the script fills and prints a self-contained summary (also written to
``OUT/overhead_summary.txt`` and, as data, ``OUT/overhead.json``):

* ``runs.tsv``: one line per timed run: program, mode (``bare`` = the exact ncu command the
  wrapper runs; ``wrapper``; ``wrapper-nohtml``; ``default`` = census then depth), repetition,
  wall seconds, exit status, the wrapper's report folder;
* ``exports.tsv``: the export probes on one ``.ncu-rep``: probe, repetition, wall seconds, exit
  status, bytes, CSV headers seen, rule rows seen;
* ``filter/*.csv``: the raw pages of the ``--filter-mode per-launch-config`` probes, with their
  options on the first line.

Usage: ``python3 scripts/overhead_summary.py WORK_DIR [OUT_DIR]``. Needs only the standard
library, so it also runs where the analysis does not.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path

STEPS = ("census_export", "export", "load", "read", "analyze", "render", "text")
NCU_STEPS = ("ncu", "census")
TARGET_7_KERNELS_S = 0.5
TARGET_SHARE = 0.05


def _med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def read_runs(work: Path) -> list[dict]:
    """The timed runs, each with the wrapper's ``session.timings_s`` where it wrote one."""
    runs = []
    path = work / "runs.tsv"
    if not path.is_file():
        return runs
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        program, mode, rep, wall, rc, folder = (line.split("\t") + [""] * 6)[:6]
        run = {"program": program, "mode": mode, "rep": int(rep), "wall_s": float(wall),
               "rc": int(rc), "timings_s": None, "kernels": None}
        report = Path(folder) / "report.json" if folder else None
        if report is not None and report.is_file():
            try:
                data = json.loads(report.read_text())
            except ValueError:
                data = {}
            session = data.get("session") or {}
            run["timings_s"] = session.get("timings_s")
            run["kernels"] = len(data.get("kernels") or [])
            run["passes_per_kernel"] = session.get("passes_per_kernel")
        runs.append(run)
    return runs


def own_seconds(timings: dict) -> float:
    """The wrapper's own steps: everything it timed but ncu's runs of the program."""
    return sum(v for k, v in timings.items() if k not in NCU_STEPS)


def ncu_seconds(timings: dict) -> float:
    return sum(timings.get(k, 0.0) for k in NCU_STEPS)


def summarise_program(program: str, runs: list[dict]) -> tuple[list[str], dict]:
    """Lines and data for one program's runs."""
    lines, data = [f"## {program}"], {"program": program, "modes": {}}
    bare = [r["wall_s"] for r in runs if r["mode"] == "bare" and r["rc"] == 0]
    for mode in ("bare", "wrapper", "wrapper-nohtml", "default"):
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        ok = [r for r in mine if r["rc"] == 0]
        walls = [r["wall_s"] for r in ok]
        entry = {"runs": len(mine), "ok": len(ok), "wall_s": walls}
        head = (f"{mode:15s} {len(ok)}/{len(mine)} ok, wall median {_fmt(_med(walls))} s "
                f"(runs: {', '.join(_fmt(w) for w in walls) or '-'})")
        if mode != "bare" and bare and walls and mode != "default":
            added = (_med(walls) - _med(bare)) / _med(bare)
            head += f"; whole run {100 * added:+.1f}% against bare ncu's median"
            entry["added_vs_bare"] = added
        lines.append(head)
        timed = [r for r in ok if r["timings_s"]]
        if timed:
            kernels = timed[0]["kernels"]
            steps = {k: _med([r["timings_s"].get(k, 0.0) for r in timed])
                     for k in (*NCU_STEPS, *STEPS) if any(k in r["timings_s"] for r in timed)}
            own = [own_seconds(r["timings_s"]) for r in timed]
            share = [own_seconds(r["timings_s"]) / max(ncu_seconds(r["timings_s"]), 1e-9)
                     for r in timed]
            entry.update(steps_median_s=steps, own_s=own, own_share_of_ncu=share,
                         kernels=kernels)
            lines.append("    steps (median s): " + ", ".join(
                f"{k} {_fmt(v)}" for k, v in steps.items()))
            lines.append(f"    wrapper's own steps after ncu: {', '.join(_fmt(o) for o in own)} s"
                         f" = {', '.join(f'{100 * s:.1f}%' for s in share)} of ncu's time"
                         f" ({kernels} kernel(s) in the report)")
        data["modes"][mode] = entry
    return lines, data


def summarise_exports(work: Path) -> tuple[list[str], dict]:
    """What exporting one report costs, per way of doing it."""
    path = work / "exports.tsv"
    if not path.is_file():
        return ["(no export probes ran)"], {}
    rows: dict[str, list[list[str]]] = {}
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 6:
            rows.setdefault(parts[0], []).append(parts)
    lines, data = [], {}
    for probe, found in rows.items():
        walls = [float(p[2]) for p in found]
        rcs = sorted({p[3] for p in found})
        entry = {"wall_s": walls, "rc": rcs, "bytes": int(found[-1][4] or 0),
                 "csv_headers": int(found[-1][5] or 0),
                 "rule_rows": int(found[-1][6] or 0) if len(found[-1]) > 6 else None}
        data[probe] = entry
        shown = ", ".join(_fmt(w) for w in walls)
        lines.append(f"{probe:34s} median {_fmt(_med(walls))} s ({shown}), rc {','.join(rcs)}, "
                     f"{entry['bytes']:,} bytes, "
                     f"{entry['csv_headers']} CSV header(s), {entry['rule_rows']} rule row(s)")
    return lines, data


def _profiled(path: Path) -> tuple[str, list[str]]:
    """A filter probe's options and the launches it profiled (name, grid, block, smem)."""
    text = path.read_text(errors="replace").splitlines()
    options = text[0].lstrip("# ") if text else ""
    header, found = None, []
    for row in csv.reader(text[1:]):
        if row and row[0] == "ID":
            header = row
            continue
        if header and row and row[0].strip().isdigit():
            d = dict(zip(header, row, strict=False))
            found.append(f"{d.get('Kernel Name', '?')} grid {d.get('Grid Size', '?')} block "
                         f"{d.get('Block Size', '?')} smem "
                         f"{d.get('launch__shared_mem_per_block_dynamic', '?')}")
    return options, found


def summarise_filters(work: Path) -> tuple[list[str], dict]:
    """Whether ncu's per-launch-config key tells template instantiations apart."""
    folder = work / "filter"
    lines, data = [], {}
    for path in sorted(folder.glob("*.csv")) if folder.is_dir() else []:
        options, found = _profiled(path)
        both = any("kT<1>" in f or "ILi1E" in f for f in found) and any(
            "kT<2>" in f or "ILi2E" in f for f in found)
        data[path.stem] = {"options": options, "profiled": found, "both_instantiations": both}
        lines.append(f"{path.stem}: {options}")
        lines.append(f"    {len(found)} launch(es) profiled; kT<1> and kT<2> both profiled: "
                     f"{'YES' if both else 'no'}")
        lines += [f"      {f}" for f in found]
        if not found:
            tail = [t for t in path.read_text(errors="replace").splitlines() if "==ERROR==" in t]
            lines += [f"      {t}" for t in tail[:3]] or ["      (no raw rows: see the file)"]
    return lines, data


def main(argv: list[str]) -> int:
    """Print the summary; write it and its data to OUT_DIR when given."""
    work = Path(argv[1])
    out = Path(argv[2]) if len(argv) > 2 else None
    runs = read_runs(work)
    text = ["# ncu-advise's own cost against ncu (issue 24), from scripts/gpu_overhead.sh", ""]
    host = work / "logs" / "host.txt"
    if host.is_file():
        text += ["## machine", *host.read_text().strip().splitlines(), ""]
    text += [
        "Modes: bare = the exact ncu command the wrapper runs (same options, --all-launches);",
        "wrapper = ncu-advise --all-launches (report.html + report.json + text);",
        "wrapper-nohtml = the same with --no-html; default = ncu-advise with no option (census,",
        "then depth). 'Own steps' = everything in session.timings_s but ncu's runs of the",
        "program (census_export, export, load, read, analyze, render, text). Targets:",
        f"own steps <= {TARGET_7_KERNELS_S} s on a ~7-kernel program (forms_app has 9) and",
        f"<= {100 * TARGET_SHARE:.0f}% of ncu's time on the corpus programs.", ""]
    summary: dict = {"programs": [], "exports": {}, "filters": {}}
    for program in dict.fromkeys(r["program"] for r in runs):
        lines, data = summarise_program(program, [r for r in runs if r["program"] == program])
        text += [*lines, ""]
        summary["programs"].append(data)
    verdicts = []
    for data in summary["programs"]:
        entry = data["modes"].get("wrapper") or {}
        if not entry.get("own_s"):
            continue
        own, share = _med(entry["own_s"]), _med(entry["own_share_of_ncu"])
        if data["program"] == "forms_app":
            met = "MET" if own <= TARGET_7_KERNELS_S else "NOT met"
            verdicts.append(f"forms_app: own steps median {own:.2f} s: target <= "
                            f"{TARGET_7_KERNELS_S} s {met}")
            nohtml = data["modes"].get("wrapper-nohtml") or {}
            if nohtml.get("own_s"):
                verdicts.append("forms_app --no-html: own steps median "
                                f"{_med(nohtml['own_s']):.2f} s")
        else:
            met = "MET" if share <= TARGET_SHARE else "NOT met"
            verdicts.append(f"{data['program']}: own steps {100 * share:.1f}% of ncu's time "
                            f"(median): target <= 5% {met}")
    text += ["## verdicts", *(verdicts or ["(no wrapper run wrote a report)"]), ""]
    lines, summary["exports"] = summarise_exports(work)
    text += ["## exporting one .ncu-rep (forms_app, advisor set): what each way costs",
             "(the wrapper today runs import-raw and import-details side by side: 'both-parallel')",
             *lines, ""]
    lines, summary["filters"] = summarise_filters(work)
    text += ["## ncu --filter-mode per-launch-config: does a mangled name base split template",
             "## instantiations of one configuration? (scripts/probe/filter_mode_probe.py)",
             "(kT<1> and kT<2> share grid, block and shared memory; the function-name key",
             "profiles only kT<1>. YES under a mangled-name probe means the census's second",
             "depth run can go, given depth runs select by mangled name)",
             *(lines or ["(no filter probes ran)"]), ""]
    report = "\n".join(text)
    print(report)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "overhead_summary.txt").write_text(report + "\n")
        (out / "overhead.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
