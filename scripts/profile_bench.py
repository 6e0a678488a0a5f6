"""GPU benchmark of issue 13: the advisor set against --set full, and the wrapper's own cost.

Run by scripts/gpu_profile_bench.sh on the GPU machine (it needs ncu and a GPU). Stages, each
guarded by the time left and followed by a pack of everything so far (a cut-off run still
returns data):

0. setup: ncu, its stock sections, the advisor options; a probe of the advisor set on one
   kernel, with fallbacks (without metrics the H200's full set lacks; without the derived
   definitions; a --metrics form) if ncu refuses it;
1. table: every demo pair and three programs this project did not write (a PyTorch MLP step,
   PyTorch ops, Triton kernels), under --set full and the advisor set one after the other
   (alternating which goes first): wall time, kernels, passes per kernel; both reports exported
   (raw + details CSV) for the findings-equality test; the findings compared here too;
2. overhead: `ncu-advise profile` against the bare ncu command it runs, alternating, on a
   program of 32 kernels; and the wrapper's own timings from report.json;
3. checks on real runs: multi-process, -k regex, the short form with an explicit path, an
   unknown command, Ctrl-C;
4. section costs: passes of one kernel under each stock section alone and added to ours.

Writes OUT/profile_bench.json (the summary) and OUT/profile_bench.tar.gz (logs, exports).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ncu_advisor.profiling import sections as collect  # noqa: E402
from ncu_advisor.profiling.run import build_ncu_command, can_read_ncu_rep  # noqa: E402

PASSES = re.compile(r'^==PROF== Profiling "(?P<name>.*?)".*?- (?P<passes>\d+) pass(?:es)?\s*$')
PY = sys.executable
FOREIGN = {  # program name -> (arguments, timeout per run in s)
    "torch_tf32": (["sample_programs/torch_tf32.py"], 240),
    "triton_kernels": (["sample_programs/triton_kernels.py"], 240),
    "torch_ops": (["sample_programs/torch_ops.py"], 300),
}
# Metrics the advisor set asks for that the H200's full-set captures lack (alternatives for
# other architectures or versions): dropped by the first fallback if ncu refuses the set.
NOT_IN_FULL_ON_H200 = ("dram__bytes.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
GZIP_OVER = 150_000
DEMOS_IN_TABLE = int(os.environ.get("DEMOS_IN_TABLE", "99"))  # a shorter table when time is short


class Bench:
    """State of one benchmark run: where files go, the summary, the clock."""

    def __init__(self, out: Path, work: Path, budget: float) -> None:
        self.out, self.work, self.budget = out, work, budget
        self.t0 = time.monotonic()
        self.stage_end = self.t0 + budget
        self.summary: dict = {"stages": {}, "runs": [], "notes": []}
        self.exports: list[subprocess.Popen] = []
        for sub in ("logs", "exports", "reps", "wrap", "checks", "probe"):
            (work / sub).mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        """Seconds left to the current stage."""
        return self.stage_end - time.monotonic()

    def log(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} +{time.monotonic() - self.t0:.0f}s] {text}",
              flush=True)

    def pack(self) -> None:
        """Write the summary and the archive now (each stage ends with this)."""
        self.summary["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        (self.work / "profile_bench.json").write_text(json.dumps(self.summary, indent=1))
        shutil.copy(self.work / "profile_bench.json", self.out / "profile_bench.json")
        tmp = self.out / ".profile_bench.tar.gz"
        with tarfile.open(tmp, "w:gz") as tar:
            for sub in ("logs", "exports", "checks", "probe", "profile_bench.json"):
                tar.add(self.work / sub, arcname=sub)
        os.replace(tmp, self.out / "profile_bench.tar.gz")


def run(cmd: list[str], log: Path, timeout: float, env: dict | None = None,
        cwd: Path | None = None) -> dict:
    """Run a command with its output in a log file; return rc, wall time, passes."""
    start = time.monotonic()
    with log.open("w") as fh:
        fh.write("$ " + shlex.join(cmd) + "\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout,
                                  env=env, cwd=cwd, check=False)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    wall = time.monotonic() - start
    text = log.read_text(errors="replace")
    passes = [int(m["passes"]) for m in map(PASSES.match, text.splitlines()) if m]
    return {"rc": rc, "wall_s": round(wall, 2), "kernels": len(passes), "passes": passes,
            "errors": [line for line in text.splitlines() if line.startswith("==ERROR==")][:5],
            "log": str(log.relative_to(log.parent.parent))}


def gzip_big(path: Path) -> Path:
    if path.is_file() and path.stat().st_size > GZIP_OVER:
        gz = path.with_name(path.name + ".gz")
        with path.open("rb") as src, gzip.GzipFile(gz, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        return gz
    return path


def export_async(b: Bench, ncu: str, rep: Path, stem: str) -> None:
    """Export a report's raw and details pages in the background (the GPU is not needed)."""
    script = (f"{shlex.quote(ncu)} --import {shlex.quote(str(rep))} --csv --page raw "
              f"> {b.work}/exports/{stem}.raw.csv 2>> {b.work}/logs/{stem}.import.log; "
              f"{shlex.quote(ncu)} --import {shlex.quote(str(rep))} --csv "
              f"> {b.work}/exports/{stem}.details.csv 2>> {b.work}/logs/{stem}.import.log")
    b.exports.append(subprocess.Popen(["bash", "-c", script]))


def finish_exports(b: Bench) -> None:
    for proc in b.exports:
        try:
            proc.wait(timeout=max(b.left(), 30))
        except subprocess.TimeoutExpired:
            proc.kill()
    b.exports.clear()
    for path in sorted((b.work / "exports").glob("*.csv")):
        gzip_big(path)


# --------------------------------------------------------------------------------------------
# 0. setup


def write_variant(folder: Path, drop: tuple[str, ...], definitions: bool) -> Path:
    """An edited copy of the advisor section file (used through NCU_ADVISE_SECTIONS)."""
    text = collect.section_text()
    for metric in drop:
        text = re.sub(r'  # [^\n]*\n  Metrics \{\n    Label: "' + re.escape(metric)
                      + r'"\n    Name: "' + re.escape(metric) + r'"\n  \}\n', "", text)
    if not definitions:
        text = text.split("\nMetricDefinitions {")[0] + "\n"
        for name in collect.DERIVED:
            text = re.sub(r'  # [^\n]*\n  Metrics \{\n    Label: "' + re.escape(name)
                          + r'"\n    Name: "' + re.escape(name) + r'"\n(    Filter \{\n      '
                          r'MinArch: \w+\n    \}\n)?  \}\n', "", text)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{collect.ADVISOR_SECTION}.section").write_text(text)
    return folder


def advise_args(ncu: str, variant: dict) -> list[str]:
    if variant.get("metrics_form"):
        metrics = [m for m in collect.advisor_metrics()
                   if m not in collect.DERIVED and m not in NOT_IN_FULL_ON_H200]
        args = []
        for section in collect.RULE_SECTIONS:
            args += ["--section", section]
        return args + ["--metrics", ",".join(metrics)]
    env_before = os.environ.get("NCU_ADVISE_SECTIONS")
    if variant.get("folder"):
        os.environ["NCU_ADVISE_SECTIONS"] = variant["folder"]
    try:
        return collect.advisor_ncu_args(ncu)[0]
    finally:
        if env_before is None:
            os.environ.pop("NCU_ADVISE_SECTIONS", None)
        else:
            os.environ["NCU_ADVISE_SECTIONS"] = env_before


def setup(b: Bench, ncu: str, probe_prog: list[str]) -> dict:
    """Find the stock sections and a form of the advisor set that this ncu accepts."""
    stock = collect.stock_section_folder(ncu)
    s = b.summary
    s["ncu"] = ncu
    s["ncu_version"] = subprocess.run([ncu, "--version"], capture_output=True, text=True,
                                      check=False).stdout.strip().splitlines()[-1:]
    s["stock_sections"] = str(stock)
    s["can_read_ncu_rep"] = can_read_ncu_rep()
    s["advisor_metrics"] = len(collect.advisor_metrics())
    s["rule_sections"] = list(collect.RULE_SECTIONS)
    if stock:
        ids = {}
        for path in sorted(stock.glob("*.section")):
            found = re.search(r'^Identifier:\s*"([^"]+)"', path.read_text(errors="replace"),
                              re.M)
            ids[path.name] = found.group(1) if found else None
        s["stock_section_ids"] = ids
    for what in ("--list-sets", "--list-sections"):
        cmd = [ncu, *advise_args(ncu, {})[:4], what] if stock else [ncu, what]
        run(cmd, b.work / "logs" / f"setup{what}.log", 60)
    variants = [
        {"name": "shipped"},
        {"name": "without-h200-absent", "drop": NOT_IN_FULL_ON_H200},
        {"name": "without-per-pc", "drop": NOT_IN_FULL_ON_H200 + collect.SOURCE_LINE_METRICS
         + ("thread_inst_executed",)},
        {"name": "without-derived", "drop": NOT_IN_FULL_ON_H200 + collect.SOURCE_LINE_METRICS
         + ("thread_inst_executed",), "definitions": False},
        {"name": "metrics-form", "metrics_form": True},
    ]
    for variant in variants:
        if variant["name"] != "shipped" and not variant.get("metrics_form"):
            variant["folder"] = str(write_variant(b.work / "probe" / variant["name"],
                                                  variant.get("drop", ()),
                                                  variant.get("definitions", True)))
        cmd = [ncu, "--clock-control", "none", *advise_args(ncu, variant), "-c", "1", "-f",
               "-o", str(b.work / "reps" / f"probe-{variant['name']}"), *probe_prog]
        if b.left() < 5:
            break
        result = run(cmd, b.work / "probe" / f"{variant['name']}.log", max(b.left(), 30))
        rep = b.work / "reps" / f"probe-{variant['name']}.ncu-rep"
        result["report"] = rep.is_file()
        variant["probe"] = result
        b.log(f"probe {variant['name']}: rc={result['rc']} passes={result['passes']} "
              f"errors={result['errors']}")
        if result["rc"] == 0 and rep.is_file() and result["kernels"] and not result["errors"]:
            if variant.get("folder"):
                os.environ["NCU_ADVISE_SECTIONS"] = variant["folder"]
            s["advise_variant"] = variant
            return variant
        s.setdefault("advise_variants_refused", []).append(variant)
    s["advise_variant"] = {"name": "none worked"}
    return {}


# --------------------------------------------------------------------------------------------
# 1. the pass/time table


def programs() -> list[tuple[str, list[str], float]]:
    """The programs of the table: the foreign ones first (they matter most), then the demos."""
    demos = sorted(p.name for p in (REPO / "kernels").iterdir() if (p / "demo.toml").is_file())
    progs = [(name, [PY, *args], timeout) for name, (args, timeout) in FOREIGN.items()]
    progs += [(f"demo-{d}", [PY, "-m", "ncu_advisor.demos", "once", d], 120) for d in demos]
    return progs[:len(FOREIGN) + DEMOS_IN_TABLE]


def table(b: Bench, ncu: str, variant: dict) -> None:
    sets = {"full": ["--set", "full"], "advise": advise_args(ncu, variant)}
    rows = []
    for i, (name, prog, timeout) in enumerate(programs()):
        order = ["full", "advise"] if i % 2 == 0 else ["advise", "full"]
        row = {"program": name, "order": order}
        for which in order:
            if b.left() < 15:
                b.log(f"skip {name} {which} (time)")
                continue
            rep = b.work / "reps" / f"{name}.{which}"
            cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off",
                   *sets[which], "-f", "-o", str(rep), *prog]
            result = run(cmd, b.work / "logs" / f"{name}.{which}.log",
                         min(timeout, max(b.left(), 15)), cwd=REPO)
            result.update(program=name, set=which)
            b.summary["runs"].append(result)
            row[which] = {k: result[k] for k in ("wall_s", "kernels", "rc")}
            row[which]["passes"] = max(result["passes"]) if result["passes"] else None
            b.log(f"{name} {which}: {result['wall_s']} s, {result['kernels']} kernels, "
                  f"passes {sorted(set(result['passes']))}, rc {result['rc']}")
            if Path(str(rep) + ".ncu-rep").is_file():
                export_async(b, ncu, Path(str(rep) + ".ncu-rep"), f"{name}.{which}")
        if "full" in row and "advise" in row and row["full"]["passes"] and row["advise"][
                "passes"]:
            row["pass_ratio"] = round(row["advise"]["passes"] / row["full"]["passes"], 3)
            row["time_ratio"] = round(row["advise"]["wall_s"] / row["full"]["wall_s"], 3)
        rows.append(row)
        b.summary["table"] = rows
        if i % 4 == 3:
            b.pack()
    finish_exports(b)
    totals = {w: sum(r[w]["wall_s"] for r in rows if w in r and "advise" in r and "full" in r)
              for w in ("full", "advise")}
    b.summary["table_totals_s"] = totals


def compare_findings(b: Bench) -> None:
    """The findings of each program under both sets (the committed test repeats this)."""
    from ncu_advisor.analysis import analyze
    from ncu_advisor.readers import read_report

    result = b.summary.setdefault("findings_compared", {})
    for raw_full in sorted((b.work / "exports").glob("*.full.raw.csv*")):
        if b.left() < 5:
            b.summary["notes"].append("findings comparison cut short (time)")
            break
        name = raw_full.name.split(".full.raw.csv")[0]
        found = {}
        try:
            for which in ("full", "advise"):
                files = sorted((b.work / "exports").glob(f"{name}.{which}.*.csv*"))
                analysis = analyze(read_report(files))
                names = analysis.report.launches.set_index("launch")["short_name"]
                found[which] = {(f.launch, names.get(f.launch), f.rule, f.severity)
                                for f in analysis.findings}
        except Exception as exc:  # noqa: BLE001 - record and go on
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        only_full = sorted(map(list, found["full"] - found["advise"]))
        only_advise = sorted(map(list, found["advise"] - found["full"]))
        result[name] = {"findings": len(found["full"]), "equal": not only_full and not only_advise,
                        "only_full": only_full, "only_advise": only_advise}


# --------------------------------------------------------------------------------------------
# 2. the wrapper's own cost


def overhead(b: Bench, ncu: str, variant: dict, repeats: int = 2) -> None:
    prog = [PY, *FOREIGN["torch_ops"][0]]
    extra = ["--profile-from-start", "off"]
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{os.environ.get('PYTHONPATH', '')}")
    runs = []
    b.summary["overhead"] = {"program": "torch_ops", "runs": runs}
    modes = ["wrapper"] + (["wrapper-rep"] if can_read_ncu_rep() else [])
    if os.environ.get("OVERHEAD_MODES"):  # OVERHEAD_MODES=wrapper: more repeats, less time
        modes = os.environ["OVERHEAD_MODES"].split(",")
    for i in range(repeats):
        for kind in (["bare", *modes] if i % 2 == 0 else [*modes, "bare"]):
            if b.left() < 20 or (i > 0 and b.left() < 100):
                b.log(f"skip overhead {kind}{i} (time)")
                continue
            out = b.work / "wrap" / f"{kind}{i}"
            if kind == "bare":
                cmd = build_ncu_command(ncu, prog[0], prog[1:], rep_path=out / "torch_ops",
                                        extra=extra, log_file=out / "torch_ops.ncu.log")
                if variant.get("metrics_form"):
                    cut = cmd.index("--section-folder")
                    end = cmd.index("-o")
                    cmd = cmd[:cut] + advise_args(ncu, variant) + extra + cmd[end:]
                out.mkdir(parents=True, exist_ok=True)
            else:
                cmd = [PY, "-m", "ncu_advisor.cli", "-o", str(out)]
                if kind == "wrapper-rep":
                    cmd.append("--no-csv")
                cmd += ["--", *prog, "--", *extra]
            result = run(cmd, b.work / "logs" / f"overhead.{kind}{i}.log",
                         max(b.left(), 20), env=env, cwd=REPO)
            if kind != "bare" and (out / "report.json").is_file():
                data = json.loads((out / "report.json").read_text())
                result["timings_s"] = data["session"].get("timings_s")
                result["ncu_command"] = data["session"].get("ncu_command")
                result["report_kernels"] = len(data["kernels"])
                shutil.copy(out / "report.json", b.work / "checks" / f"overhead.{kind}{i}.json")
            if kind != "bare":
                ncu_log = out / "torch_ops.ncu.log"
                if ncu_log.is_file():
                    text = ncu_log.read_text(errors="replace")
                    result["passes"] = [int(m["passes"]) for m in
                                        map(PASSES.match, text.splitlines()) if m]
            else:
                text = (out / "torch_ops.ncu.log").read_text(errors="replace") if (
                    out / "torch_ops.ncu.log").is_file() else ""
                result["passes"] = [int(m["passes"]) for m in
                                    map(PASSES.match, text.splitlines()) if m]
            result.update(kind=kind, repeat=i)
            runs.append(result)
            b.log(f"overhead {kind}{i}: {result['wall_s']} s rc {result['rc']} "
                  f"{result.get('timings_s')}")
            b.pack()
    bare = [r["wall_s"] for r in runs if r["kind"] == "bare" and r["rc"] == 0]
    summary = b.summary["overhead"]
    for mode in modes:
        wrapped = [r["wall_s"] for r in runs if r["kind"] == mode and r["rc"] == 0]
        if bare and wrapped:
            share = (statistics.median(wrapped) - statistics.median(bare)) / statistics.median(
                bare)
            own = [sum(v for k, v in (r.get("timings_s") or {}).items() if k != "ncu")
                   / r["timings_s"]["ncu"] for r in runs
                   if r["kind"] == mode and r.get("timings_s")]
            summary[mode] = {"bare_median_s": statistics.median(bare),
                             "wrapper_median_s": statistics.median(wrapped),
                             "share_of_ncu_pct": round(100 * share, 1),
                             "own_timings_share_pct": [round(100 * x, 1) for x in own]}


# --------------------------------------------------------------------------------------------
# 3. checks on real runs


def checks(b: Bench) -> None:
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{os.environ.get('PYTHONPATH', '')}")
    cli = [PY, "-m", "ncu_advisor.cli"]
    out = b.summary.setdefault("checks", {})

    def wrapper(name: str, args: list[str], cwd: Path = REPO) -> dict:
        folder = b.work / "checks" / name
        result = run([*cli, "-o", str(folder), *args], b.work / "logs" / f"check.{name}.log",
                     max(b.left(), 15), env=env, cwd=cwd)
        if (folder / "report.json").is_file():
            data = json.loads((folder / "report.json").read_text())
            result["report_kernels"] = [k["name"] for k in data["kernels"]]
            result["timings_s"] = data["session"].get("timings_s")
            # Source lines behind findings come from per-instruction metrics of the .ncu-rep.
            result["findings_with_source_lines"] = sum(
                bool(f.get("source_lines")) for k in data["kernels"] for f in k["findings"])
            result["validity"] = data.get("validity")
        for log in folder.glob("*.ncu.log"):
            text = log.read_text(errors="replace")
            result["processes"] = len(re.findall(r"==PROF== Connected to process", text))
            result["passes"] = [int(m["passes"]) for m in map(PASSES.match, text.splitlines())
                                if m]
        for big in folder.glob("*.ncu-rep"):
            big.unlink()  # the archive keeps the small files only
        b.log(f"check {name}: rc {result['rc']} {result.get('report_kernels')}")
        return result

    if b.left() > 10:
        out["multi_process"] = wrapper(
            "multi_process", ["-k", "regex:parent_scale|child_add", "--", PY,
                              "sample_programs/multiproc_cupy.py"])
        out["multi_process"]["expect"] = "parent_scale once, child_add twice, 2 processes"
    if b.left() > 10:
        out["kernel_regex"] = wrapper(
            "kernel_regex", ["-k", "regex:strided", "--", PY, "-m", "ncu_advisor.demos",
                             "once", "coalescing", "--", "--profile-from-start", "off"])
    if b.left() > 10:
        bindir = b.work / "bin"
        bindir.mkdir(exist_ok=True)
        script = bindir / "run_demo"
        script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(REPO))} && exec "
                          f"{shlex.quote(PY)} -m ncu_advisor.demos once tiling\n")
        script.chmod(0o755)
        out["short_form"] = wrapper("short_form", ["-c", "1", "./run_demo", "--",
                                                   "--profile-from-start", "off"], cwd=bindir)
        unknown = subprocess.run([*cli, "grep", "a", "b"], capture_output=True, text=True,
                                 env=env, cwd=REPO, check=False)
        out["unknown_command"] = {"rc": unknown.returncode, "stderr": unknown.stderr[-400:]}
    if b.left() > 15:
        out["ctrl_c"] = ctrl_c(b, cli, env)
    b.pack()


def ctrl_c(b: Bench, cli: list[str], env: dict) -> dict:
    """Start the wrapper on 32 kernels, press Ctrl-C after 6 are profiled."""
    folder = b.work / "checks" / "ctrl_c"
    log = b.work / "logs" / "check.ctrl_c.log"
    cmd = [*cli, "-o", str(folder), "--", PY, "sample_programs/torch_ops.py", "--",
           "--profile-from-start", "off"]
    start = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        sent = None
        limit = max(b.left(), 20)
        while proc.poll() is None and time.monotonic() - start < limit:
            ncu_log = folder / "torch_ops.ncu.log"
            done = ncu_log.read_text(errors="replace").count(" passes") if ncu_log.is_file() else 0
            # After 6 kernels, or with 12 s of the stage left: press Ctrl-C.
            if sent is None and (done >= 6 or time.monotonic() - start > limit - 12):
                proc.send_signal(signal.SIGINT)
                sent = time.monotonic()
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
        rc = proc.wait()
    result = {"rc": rc, "sigint_after_s": round(sent - start, 1) if sent else None,
              "exit_after_sigint_s": round(time.monotonic() - sent, 1) if sent else None,
              "report_json": (folder / "report.json").is_file(),
              "rep": any(folder.glob("*.ncu-rep")),
              "tail": log.read_text(errors="replace")[-1500:]}
    if result["report_json"]:
        result["report_kernels"] = len(json.loads((folder / "report.json").read_text())[
            "kernels"])
    for big in folder.glob("*.ncu-rep"):
        big.unlink()
    b.log(f"ctrl-c: {result['rc']} report {result['report_json']}")
    return result


# --------------------------------------------------------------------------------------------
# 4. what each section costs


def section_costs(b: Bench, ncu: str, probe_prog: list[str]) -> None:
    stock = collect.stock_section_folder(ncu)
    if stock is None:
        return
    ours = ["--section-folder", str(stock), "--section-folder", str(collect.section_folder()),
            "--section", collect.ADVISOR_SECTION]
    ids = sorted({v for v in b.summary.get("stock_section_ids", {}).values() if v})
    configs = [("full", ["--set", "full"]), ("basic", ["--set", "basic"]),
               ("advise", advise_args(ncu, b.summary.get("advise_variant", {}))),
               ("ours-only", ours)]
    for section in ("WarpStateStats", "SchedulerStats", "ComputeWorkloadAnalysis",
                    "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables",
                    "MemoryWorkloadAnalysis_Chart", "SourceCounters", "InstructionStats",
                    "WorkloadDistribution", "SpeedOfLight_RooflineChart"):
        configs.append((f"advise+{section}", [*advise_args(ncu, b.summary.get(
            "advise_variant", {})), "--section", section]))
    configs += [(f"only:{s}", ["--section", s]) for s in ids]
    costs = {}
    for name, args in configs:
        if b.left() < 25:
            break
        safe = re.sub(r"[^\w.+-]", "_", name)
        result = run([ncu, "--clock-control", "none", *args, "-c", "1", "-f", "-o",
                      str(b.work / "reps" / f"cost-{safe}"), *probe_prog],
                     b.work / "probe" / f"cost-{safe}.log", 60)
        costs[name] = {"passes": result["passes"][0] if result["passes"] else None,
                       "wall_s": result["wall_s"], "rc": result["rc"],
                       "errors": result["errors"]}
        b.summary["section_costs"] = costs
    b.pack()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for all stages")
    parser.add_argument("--ncu", default=shutil.which("ncu") or "ncu")
    parser.add_argument("--probe", default="", help="a small program for one-kernel probes")
    parser.add_argument("--only", default="", help="comma list of stages to run (tests)")
    args = parser.parse_args()
    b = Bench(args.out, args.work, args.budget)
    only = set(filter(None, args.only.split(",")))
    probe_prog = shlex.split(args.probe) or [PY, "-m", "ncu_advisor.demos", "once", "coalescing"]
    # Shares of the budget: the table and the overhead are what the issue asks for first.
    shares = {"setup": 0.08, "table": 0.52, "overhead": 0.22, "checks": 0.13, "costs": 0.05,
              "compare": 0.0}
    if os.environ.get("SHARES"):  # e.g. SHARES=setup=0.04,table=0.45,overhead=0.38,checks=0.13
        shares.update({k: float(v) for k, v in (p.split("=") for p in
                                                os.environ["SHARES"].split(","))})

    def stage(name: str) -> bool:
        now = time.monotonic()
        spent_before = sum(shares[k] for k in list(shares)[:list(shares).index(name) + 1])
        # A stage may use what earlier stages left unused, up to its own end point.
        b.stage_end = b.t0 + args.budget * spent_before
        if name == "compare":  # CPU only: may run a minute past the budget
            b.stage_end = b.t0 + args.budget + 60
        b.summary["stages"][name] = {"started_s": round(now - b.t0, 1),
                                     "until_s": round(b.stage_end - b.t0, 1)}
        return not only or name in only

    try:
        stage("setup")
        variant = setup(b, args.ncu, probe_prog)
        b.pack()
        if stage("table") and variant:
            table(b, args.ncu, variant)
            b.pack()
        if stage("overhead") and variant:
            overhead(b, args.ncu, variant, repeats=int(os.environ.get("OVERHEAD_REPEATS", "2")))
            b.pack()
        if stage("checks"):
            checks(b)
        if stage("costs"):
            section_costs(b, args.ncu, probe_prog)
        if stage("compare"):
            finish_exports(b)
            compare_findings(b)
    except Exception as exc:  # noqa: BLE001 - whatever happened, return what there is
        b.summary["notes"].append(f"stopped by {type(exc).__name__}: {exc}")
        import traceback

        (b.work / "logs" / "driver_traceback.txt").write_text(traceback.format_exc())
        b.log(f"stopped: {exc}")
    finally:
        finish_exports(b)
        b.pack()
    b.log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
