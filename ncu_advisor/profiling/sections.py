"""What to collect: the advisor section set, generated from what the analysis reads.

``ncu --set full`` replays every kernel about 38 times on an H200, and most of those passes feed
metrics no part of ncu-advise reads. The ``advise`` set is exactly what the analysis can read:

* every metric of every source of every quantity (``derive/quantities.py``; rules are written in
  quantities, and a rule naming an unknown quantity fails to load, so a new rule cannot lose its
  metrics), alternatives included;
* what the roofline (peaks, clocks), the occupancy calculator, the launch-shape analysis and the
  readers (launch identity, session facts) read;
* a few of Nsight Compute's own sections (:data:`RULE_SECTIONS`), whose rules' results the
  report keeps beside ours, chosen because their metrics are almost all ours anyway.

It is written as an ncu section file, ``data/sections/NcuAdvise.section`` (shipped in the wheel;
``python -m ncu_advisor.profiling.sections --write`` regenerates it and a test checks that the
committed file is current), used as ``ncu --section-folder STOCK --section-folder OURS
--section NcuAdvise --section SpeedOfLight ...``. A section file, unlike ``--metrics``, can
define the few ``derived__*`` metrics the quantities read (ncu defines them inside its own
sections) and limit architecture-specific metrics to the architectures that have them.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = [
    "ADVISOR_SECTION",
    "ADVISOR_SET",
    "LEFT_OUT_FOR_PASSES",
    "RULE_SECTIONS",
    "advisor_metrics",
    "advisor_ncu_args",
    "metric_readers",
    "section_folder",
    "section_text",
    "stock_section_folder",
]

ADVISOR_SET = "advise"
ADVISOR_SECTION = "NcuAdvise"
# Nsight Compute's sections whose rule results the report keeps (SOLBottleneck,
# LaunchConfiguration, Theoretical/AchievedOccupancy): their metrics are nearly all ones the
# quantities read already, so they cost almost no extra passes. scripts/gpu_profile_bench.sh
# measures what each further section would add.
RULE_SECTIONS: tuple[str, ...] = ("SpeedOfLight", "LaunchStats", "Occupancy")

# Metrics that ncu defines inside its own section files (not requestable by name): the same
# definitions, with the architectures ncu applies them to. (expression, min arch or None)
DERIVED: dict[str, tuple[str, str | None]] = {
    "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second":
        ("l1tex__lsu_writeback_active_mem_lgds.sum.per_second * 128", "CC_90"),
    "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained":
        ("l1tex__lsu_writeback_active_mem_lgds.sum.peak_sustained * 128", "CC_90"),
    "derived__lts__lts2xbar_bytes.sum.peak_sustained":
        ("lts__lts2xbar_cycles_active.sum.peak_sustained * 32", None),
    "derived__memory_l2_theoretical_sectors_global_excessive":
        ("memory_l2_theoretical_sectors_global - memory_l2_theoretical_sectors_global_ideal",
         None),
    "derived__memory_l1_wavefronts_shared_excessive":
        ("memory_l1_wavefronts_shared - memory_l1_wavefronts_shared_ideal", None),
    "derived__memory_l1_conflicts_shared_nway":
        ("memory_l1_wavefronts_shared / inst_executed", None),
}
# Left out to save replay passes: they feed no rule condition, estimate or roofline, only a
# finding's evidence list or the kernel table, and together cost one replay pass per kernel on
# an H200 (21 -> 20: scripts/gpu_pass_greedy.sh, benchmarks/results/pass_greedy_2026-12-01.tsv).
# A profile made with --set full has them.
LEFT_OUT_FOR_PASSES: dict[str, str] = {
    "l1tex__t_sector_hit_rate.pct": "evidence only (tiling)",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio":
        "evidence only (latency, privatization, tiling)",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio":
        "shown in the kernel table only",
    "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio": "evidence only (divergence)",
}
# Read by the analysis but not collected, and why.
NOT_COLLECTED: dict[str, str] = {
    "derived__local_spilling_requests":
        "ncu defines it as sass__inst_executed_register_spilling, the quantity's first source",
    **dict.fromkeys(("sm__cycles_active.avg", "gpc__cycles_elapsed.max",
                     "sm__cycles_elapsed.avg", "sm__cycles_elapsed.sum",
                     "sm__inst_executed.avg.per_cycle_elapsed",
                     "sm__inst_executed.avg.per_cycle_active"),
                    "rescale the pipe shares ncu's rule messages state (of elapsed cycles) in "
                    "an imported details page; a profiled report measures the pipes directly"),
    "smsp__pcsamp_sample_count":
        "warp-stall samples per source line need ncu's PC-sampling pass: --set full (or "
        "-- --section SourceCounters) adds them",
    **{metric: f"{why}; left out to save a replay pass (--set full has it)"
       for metric, why in LEFT_OUT_FOR_PASSES.items()},
}
# Per-instruction metrics behind the source lines of findings (readers/source_page.py) that
# ride on the instrumented passes the quantities need anyway; the variant of the set that
# leaves them out is tried by scripts/profile_bench.py if ncu refuses them.
SOURCE_LINE_METRICS: tuple[str, ...] = ("memory_type", "memory_access_type")
# Metrics that exist only from some architecture on (collecting them elsewhere would fail).
MIN_ARCH: dict[str, str] = {
    "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained": "CC_90",
    "sm__ops_path_tensor_src_fp8_sparsity_off.sum": "CC_90",
    "l1tex__lsu_writeback_active_mem_lgds.sum.per_second": "CC_90",
    "l1tex__lsu_writeback_active_mem_lgds.sum.peak_sustained": "CC_90",
}
# Launch identity the .ncu-rep reader takes from metrics (readers/ncu_rep.py); the CSV pages
# print it as columns. API-level attributes: they cost no replay pass.
_IDENTITY = (
    "launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z",
    "launch__block_dim_x", "launch__block_dim_y", "launch__block_dim_z",
    "launch__device_id", "launch__context_id", "launch__stream_id",
    "device__attribute_compute_capability_major", "device__attribute_compute_capability_minor",
)
_OPERAND = re.compile(r"\b[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*")
_EXPRESSION_WORDS = {"simplify", "nan_as_zero"}


def metric_readers() -> dict[str, list[str]]:
    """Return every metric the analysis can read, each with the parts that read it.

    Returns:
        ``{metric: ["quantity dram_bytes", "roofline peak", ...]}``, alternatives included.

    """
    from ..derive import launch_shape, occupancy, roofline
    from ..derive.quantities import QUANTITIES
    from ..readers import ncu_rep_child
    from ..readers.csv_export import DURATION
    from ..readers.dispatch import SESSION_METRICS

    readers: dict[str, list[str]] = {}

    def add(metrics: Iterable[str], who: str) -> None:
        for metric in metrics:
            readers.setdefault(metric, [])
            if who not in readers[metric]:
                readers[metric].append(who)

    # Quantities without sources (NCU_STATED) come from ncu's rule messages, which fill them
    # only where a report has no metric for them: a profiled report has the metrics.
    for quantity in QUANTITIES:
        for source in quantity.sources:
            add(source.metrics, f"quantity {quantity.name}")
    for precision, (alternatives, _) in roofline._PEAK_METRICS.items():
        add(alternatives, f"roofline {precision} peak")
    for level, (_, peak_metrics) in roofline._LEVELS.items():
        add(peak_metrics, f"roofline {level} peak")
    add([roofline._SM_HZ], "roofline clock")
    add(occupancy.NCU_LIMIT_METRICS.values(), "occupancy (ncu's block limits)")
    add([occupancy.NCU_THEORETICAL_PCT, occupancy.NCU_ACHIEVED_PCT], "occupancy")
    add(occupancy.INPUT_METRICS.values(), "occupancy calculator")
    add(["launch__func_cache_config"], "occupancy calculator")
    add(launch_shape._SM_COUNT_METRICS, "launch shape")
    add(["launch__grid_size", "launch__block_size", "launch__waves_per_multiprocessor"],
        "launch shape")
    add(SESSION_METRICS.values(), "session facts")
    add([m for m in ncu_rep_child.REP_METRICS if not m.startswith("smsp__pcsamp")]
        + list(SOURCE_LINE_METRICS), "source lines")
    add([DURATION], "readers (launch duration)")
    add(_IDENTITY, "readers (launch identity)")
    return readers


def advisor_metrics() -> list[str]:
    """Return the metrics of the advisor set: what the analysis reads, sorted.

    The ``derived__*`` ones are defined in the section file from the metrics they are made of,
    which are in the list too.
    """
    names = set(metric_readers()) - NOT_COLLECTED.keys()
    for expression, _ in (DERIVED[name] for name in names & DERIVED.keys()):
        names.update(_operands(expression))
    return sorted(names)


def _operands(expression: str) -> list[str]:
    return [w for w in _OPERAND.findall(expression)
            if w not in _EXPRESSION_WORDS and not w.replace(".", "").isdigit()]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def section_text() -> str:
    """Return the advisor section file (protobuf text format, as ncu's ``sections/``)."""
    readers = metric_readers()
    lines = [
        "# Generated by `python -m ncu_advisor.profiling.sections --write`: do not edit by hand.",
        "# The metrics ncu-advise reads (quantities, roofline, occupancy, launch shape, readers).",
        "# Use: ncu --section-folder <ncu's sections> --section-folder <this folder> "
        f"--section {ADVISOR_SECTION} ...",
        f"Identifier: {_quote(ADVISOR_SECTION)}",
        'DisplayName: "ncu-advise inputs"',
        'Description: "Exactly the metrics ncu-advise reads; the advise set adds Nsight Compute\'s'
        ' own ' + ", ".join(RULE_SECTIONS) + ' sections for their rule results."',
        "Order: 1000",
        f"Sets {{\n  Identifier: {_quote(ADVISOR_SET)}\n}}",
        "Metrics {",
    ]
    for metric in advisor_metrics():
        who = readers.get(metric) or [
            f"input of {d}" for d in sorted(DERIVED) if metric in _operands(DERIVED[d][0])]
        lines.append(f"  # {'; '.join(who)}")
        lines.append("  Metrics {")
        lines.append(f"    Label: {_quote(metric)}")
        lines.append(f"    Name: {_quote(metric)}")
        arch = MIN_ARCH.get(metric) or DERIVED.get(metric, ("", None))[1]
        if arch:
            lines.append(f"    Filter {{\n      MinArch: {arch}\n    }}")
        lines.append("  }")
    lines.append("}")
    lines.append("MetricDefinitions {")
    for name in sorted(DERIVED.keys() & set(advisor_metrics())):
        expression, arch = DERIVED[name]
        lines.append("  MetricDefinitions {")
        lines.append(f"    Name: {_quote(name)}")
        lines.append(f"    Expression: {_quote(expression)}")
        if arch:
            lines.append(f"    Filter {{\n      MinArch: {arch}\n    }}")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def section_folder() -> Path:
    """Return the folder of the advisor section file: ``$NCU_ADVISE_SECTIONS`` or the shipped one.

    The variable lets a user (or the benchmark) try an edited copy of the set.
    """
    override = os.environ.get("NCU_ADVISE_SECTIONS", "").strip()
    if override:
        return Path(override).expanduser()
    return Path(str(resources.files("ncu_advisor").joinpath("data/sections")))


@dataclass(frozen=True)
class _Candidate:
    path: Path
    why: str


def _version_key(path: Path) -> tuple[int, ...]:
    found = re.findall(r"\d+(?:\.\d+)+", str(path))
    return tuple(int(x) for x in found[-1].split(".")) if found else ()


def _launcher_candidates(script: Path, text: str) -> list[Path]:
    """Section folders a launcher script points to.

    A CUDA toolkit's ``bin/ncu`` may name the install it runs by an absolute path
    (``/opt/nvidia/nsight-compute/2025.3.1/ncu``) or one relative to itself
    (``$(dirname $0)/../nsight-compute-2025.3.1/ncu``): every path-like word naming
    ``nsight-compute`` is tried, with ``sections`` beside it, above it and one folder down
    (the newest version first).
    """
    found: list[Path] = []
    for word in re.findall(r"[^\s\"'=:;|&()`]+", text):
        if "nsight-compute" not in word:
            continue
        if word.startswith("$"):  # ${HERE}/../nsight-compute-X/ncu: most often the script's folder
            path = script.parent / (word.split("/", 1)[1] if "/" in word else "")
        elif word.startswith("/.."):  # what follows $(dirname $0)
            path = script.parent / word[1:]
        else:
            path = Path(word) if Path(word).is_absolute() else script.parent / word
        for base in (path, path.parent):
            found.append(base / "sections")
            found += sorted(base.glob("*/sections"), key=_version_key, reverse=True)
    return found


def stock_section_folder(ncu: str | os.PathLike[str]) -> Path | None:
    """Find the folder of Nsight Compute's own section files for an ncu executable.

    ``--section-folder`` replaces ncu's default search path, so the advisor set names the stock
    folder as well. Looks next to the real executable (``/opt/nvidia/nsight-compute/2025.3.1/
    sections``), in the install a CUDA toolkit's ``bin/ncu`` script points to
    (``/usr/local/cuda-13.0/nsight-compute-2025.3.1/sections``), then in the copy ncu keeps in
    the user's documents folder.

    Returns:
        The folder, or None if none was found.

    """
    real = Path(os.path.realpath(ncu))
    candidates = [real.parent / "sections"]
    candidates += sorted((Path(p) for p in glob.glob(str(real.parent.parent / "nsight-compute*"
                                                          / "sections"))),
                         key=_version_key, reverse=True)
    try:  # a launcher script names the install it runs
        if real.stat().st_size < 65536:
            candidates += _launcher_candidates(real, real.read_text(errors="replace"))
    except OSError:
        pass
    documents = Path.home() / "Documents" / "NVIDIA Nsight Compute"
    candidates += sorted(documents.glob("*/Sections"), key=_version_key, reverse=True)
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.glob("*.section")):
            return candidate
    return None


def advisor_ncu_args(ncu: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """Return the ncu options that collect the advisor set, and warnings.

    Args:
        ncu: The ncu executable (its stock section folder is looked up next to it).

    Returns:
        ``(args, warnings)``: ``--section-folder`` twice and a ``--section`` per section; a
        warning when ncu's own sections were not found (only ours is collected then, and the
        report lacks Nsight Compute's rule results).

    """
    stock = stock_section_folder(ncu)
    args: list[str] = []
    warnings: list[str] = []
    if stock is not None:
        args += ["--section-folder", str(stock)]
    args += ["--section-folder", str(section_folder()), "--section", ADVISOR_SECTION]
    if stock is not None:
        for section in RULE_SECTIONS:
            args += ["--section", section]
    else:
        warnings.append(
            f"Nsight Compute's own section files were not found next to {ncu}: collecting only "
            "what ncu-advise reads, without ncu's rule results (use --set full for them)")
    return args, warnings


def main(argv: list[str] | None = None) -> int:
    """``python -m ncu_advisor.profiling.sections [--write|--check|--metrics]``: print or write.

    Prints the set, or writes or checks the committed section file.
    """
    args = sys.argv[1:] if argv is None else argv
    target = Path(str(resources.files("ncu_advisor").joinpath(
        f"data/sections/{ADVISOR_SECTION}.section")))
    if args == ["--write"]:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(section_text())
        print(f"wrote {target} ({len(advisor_metrics())} metrics)")
    elif args == ["--check"]:
        current = target.read_text() if target.is_file() else ""
        if current != section_text():
            print(f"{target} is out of date: run python -m ncu_advisor.profiling.sections --write")
            return 1
    elif args == ["--metrics"]:
        print(",".join(m for m in advisor_metrics() if m not in DERIVED))
    else:
        sys.stdout.write(section_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
