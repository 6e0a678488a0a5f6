"""Per-launch measurements of a capture, for labelling it by hand without running any rule.

Prints, for every launch of a raw export: time and share of the step, NVTX range, shape,
resources, throughputs per unit, sector use, hit rates, pipe utilizations, warp issue and the
largest stall reasons, thread activity, instruction counts (memory spaces, atomics, shared
conflicts), FLOPs; and, given the details export, Nsight Compute's own OPT/WRN results.
No ncu-advise rule runs: these are measured values (and a few plain ratios of them).
The labels of the evaluation corpus (``tests/data/corpus_labels.toml``) are written from this
output and the program's source, before the tool's findings on the capture are looked at.

Usage: ``python scripts/metric_digest.py RAW.csv[.gz|.xz] [DETAILS.csv[.gz|.xz]]``.
"""

from __future__ import annotations

import math
import re
import sys

from ncu_advisor import read_report

DUR = "gpu__time_duration.sum"
# (label, metric, scale): printed when present and not NaN.
GROUPS: list[tuple[str, list[tuple[str, str, float]]]] = [
    ("throughput % of peak", [
        ("sm", "sm__throughput.avg.pct_of_peak_sustained_elapsed", 1),
        ("mem", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 1),
        ("dram", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 1),
        ("l2", "lts__throughput.avg.pct_of_peak_sustained_elapsed", 1),
        ("l1", "l1tex__throughput.avg.pct_of_peak_sustained_active", 1)]),
    ("bytes (MB)", [
        ("dram_rd", "dram__bytes_read.sum", 1e-6), ("dram_wr", "dram__bytes_write.sum", 1e-6),
        ("l2_rd", "lts__t_sectors_op_read.sum", 32e-6),
        ("l2_wr", "lts__t_sectors_op_write.sum", 32e-6),
        ("l2_atom", "lts__t_sectors_op_atom.sum", 32e-6),
        ("l2_red", "lts__t_sectors_op_red.sum", 32e-6)]),
    ("cache", [
        ("l1_hit%", "l1tex__t_sector_hit_rate.pct", 1),
        ("l2_hit%", "lts__t_sector_hit_rate.pct", 1),
        ("ldB/sector", "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio", 1),
        ("stB/sector", "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio", 1),
        ("local_ldB/sector", "smsp__sass_average_data_bytes_per_sector_mem_local_op_ld.ratio", 1)]),
    ("occupancy", [
        ("theor%", "sm__maximum_warps_per_active_cycle_pct", 1),
        ("achieved%", "sm__warps_active.avg.pct_of_peak_sustained_active", 1),
        ("waves", "launch__waves_per_multiprocessor", 1),
        ("regs", "launch__registers_per_thread", 1),
        ("smem/block KB", "launch__shared_mem_per_block", 1e-3),
        ("lim_regs", "launch__occupancy_limit_registers", 1),
        ("lim_smem", "launch__occupancy_limit_shared_mem", 1),
        ("lim_warps", "launch__occupancy_limit_warps", 1),
        ("lim_blocks", "launch__occupancy_limit_blocks", 1)]),
    ("issue", [
        ("issue_active", "smsp__issue_active.avg.per_cycle_active", 1),
        ("eligible_warps", "smsp__warps_eligible.avg.per_cycle_active", 1),
        ("active_warps", "smsp__warps_active.avg.per_cycle_active", 1),
        ("cyc/issue", "smsp__average_warp_latency_per_inst_issued.ratio", 1),
        ("thr/inst", "smsp__thread_inst_executed_per_inst_executed.ratio", 1),
        ("thr_pred_on/inst", "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio", 1),
        ("branch_uniform%", "smsp__sass_average_branch_targets_threads_uniform.pct", 1)]),
    ("instructions (M, warp level)", [
        ("all", "smsp__inst_executed.sum", 1e-6),
        ("global_ld", "smsp__sass_inst_executed_op_global_ld.sum", 1e-6),
        ("global_st", "smsp__sass_inst_executed_op_global_st.sum", 1e-6),
        ("local_ld", "smsp__sass_inst_executed_op_local_ld.sum", 1e-6),
        ("local_st", "smsp__sass_inst_executed_op_local_st.sum", 1e-6),
        ("shared_ld", "smsp__sass_inst_executed_op_shared_ld.sum", 1e-6),
        ("shared_st", "smsp__sass_inst_executed_op_shared_st.sum", 1e-6),
        ("global_red", "smsp__inst_executed_op_global_red.sum", 1e-6),
        ("global_atom", "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", 1e-6),
        ("shared_atom", "smsp__inst_executed_op_shared_atom.sum", 1e-6),
        ("spill_req", "sass__inst_executed_register_spilling", 1e-6)]),
    ("shared memory", [
        ("ld_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 1e-6),
        ("st_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", 1e-6),
        ("ld_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 1e-6),
        ("st_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", 1e-6)]),
    ("flops (G)", [
        ("fp32_add", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 1e-9),
        ("fp32_mul", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 1e-9),
        ("fp32_fma", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 1e-9),
        ("fp64_fma", "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", 1e-9),
        ("fp64_add", "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", 1e-9),
        ("fp16_fma", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", 1e-9)]),
]
PIPE = re.compile(r"^sm__inst_executed_pipe_([a-z0-9_]+)\.avg\.pct_of_peak_sustained_active$")
PIPE_CYCLES = re.compile(
    r"^sm__pipe_([a-z0-9_]+)_cycles_active\.avg\.pct_of_peak_sustained_active$")
STALL = re.compile(r"^smsp__average_warps_issue_stalled_([a-z_]+)_per_issue_active\.ratio$")


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:,.0f}"


def _value(row, metric):
    v = row.get(metric)
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def digest(raw: str, details: str | None = None) -> None:
    """Print the digest of one capture."""
    report = read_report(raw)
    wide = report.wide()
    total = float(wide[DUR].sum()) if DUR in wide else float("nan")
    rules = read_report(details).ncu_rules if details else None
    print(f"# {raw}: {len(report.launches)} launches, {total / 1e3:,.1f} us GPU time in all")
    pipes = sorted({m for m in wide.columns if PIPE.match(m) or PIPE_CYCLES.match(m)})
    stalls = [m for m in wide.columns if STALL.match(m)]
    for launch in report.launches.itertuples():
        row = wide.loc[launch.launch].to_dict()
        dur = _value(row, DUR) or float("nan")
        nvtx = getattr(launch, "nvtx", "") or ""
        print(f"\n#{launch.id} {dur / 1e3:,.2f} us ({100 * dur / total:.1f}% of the step)"
              f"  grid={launch.grid_x}x{launch.grid_y}x{launch.grid_z}"
              f" block={launch.block_x}x{launch.block_y}x{launch.block_z}"
              f"{'  nvtx=' + str(nvtx) if nvtx else ''}")
        print(f"    {launch.name[:300]}")
        for title, items in GROUPS:
            facts = [f"{label}={_fmt(v * scale)}" for label, metric, scale in items
                     if (v := _value(row, metric)) is not None]
            if facts:
                print(f"    {title}: " + " ".join(facts))
        busy = sorted(((v, (PIPE.match(m) or PIPE_CYCLES.match(m)).group(1)
                        + ("" if PIPE.match(m) else "(cycles)"))
                       for m in pipes if (v := _value(row, m)) is not None and v >= 5),
                      reverse=True)[:6]
        if busy:
            print("    pipes % of peak (active): " + " ".join(f"{n}={v:.0f}" for v, n in busy))
        top = sorted(((v, STALL.match(m).group(1)) for m in stalls
                      if (v := _value(row, m)) is not None and v >= 0.5
                      and not m.endswith(("_selected_per_issue_active.ratio",))), reverse=True)[:4]
        if top:
            print("    stall cycles per issue: " + " ".join(f"{n}={v:.2g}" for v, n in top))
        if rules is not None:
            mine = rules[(rules["launch"] == launch.launch) & rules["type"].isin(["OPT", "WRN"])]
            for r in mine.itertuples():
                text = r.title if isinstance(r.title, str) and r.title else r.description
                print(f"    ncu {r.type} {r.rule} (est. speedup {r.speedup}): {str(text)[:200]}")


if __name__ == "__main__":
    digest(*sys.argv[1:3])
