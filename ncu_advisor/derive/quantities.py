"""Named derived quantities: the vocabulary rules are written in.

Each quantity is defined once, with its unit, a label for people, and one or more sources
tried in order (metric names differ across architectures and ncu versions: on the H200 the
DRAM percentage is ``gpu__dram_throughput...``, elsewhere ``dram__throughput...``). A source
is usable for a launch when all its metrics are present; the first usable source wins.
Formulas follow the Nsight Compute Profiling Guide and the section files of ncu 2025.3.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

Series = pd.Series


@dataclass(frozen=True)
class Source:
    """One way to compute a quantity from metrics."""

    metrics: tuple[str, ...]
    fn: Callable[..., Series] | None = None  # None: the single metric itself
    formula: str = ""

    def compute(self, wide: pd.DataFrame) -> Series:
        """Evaluate on every launch (NaN where any metric is missing)."""
        if any(m not in wide.columns for m in self.metrics):
            return pd.Series(np.nan, index=wide.index)
        cols = [wide[m].astype("float64") for m in self.metrics]
        if self.fn is None:
            return cols[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = self.fn(*cols)
        return out.replace([np.inf, -np.inf], np.nan)


@dataclass(frozen=True)
class Quantity:
    """A derived value per launch, with its unit, label, and alternative sources."""

    name: str
    unit: str
    label: str
    sources: tuple[Source, ...]
    doc: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def primary_metrics(self) -> tuple[str, ...]:
        """The metrics of the first (preferred) source, named when the quantity is missing."""
        return self.sources[0].metrics if self.sources else ()


def m(name: str) -> Source:
    """Source: one metric as is."""
    return Source((name,), None, name)


def f(metrics: tuple[str, ...], fn: Callable[..., Series], formula: str) -> Source:
    """Source: a formula over several metrics."""
    return Source(tuple(metrics), fn, formula)


def _ratio_pct(a: Series, b: Series) -> Series:
    # 0 of 0 (no shared-memory traffic at all) is 0%, not unknown.
    return (100.0 * a / b.where(b > 0)).where(~((a == 0) & (b == 0)), 0.0)


def _sum(*cols: Series) -> Series:
    return sum(cols[1:], cols[0])


_FP32 = tuple(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"
              for op in ("fadd", "fmul", "ffma"))
_FP64 = tuple(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"
              for op in ("dadd", "dmul", "dfma"))
_FP16 = tuple(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"
              for op in ("hadd", "hmul", "hfma"))
_SMSP_HZ = "smsp__cycles_elapsed.avg.per_second"
_DUR = "gpu__time_duration.sum"
_TENSOR = tuple(f"sm__ops_path_tensor_src_{s}.sum" for s in
                ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "int8"))
# Hopper's FP8 tensor path (FP8 GEMMs), dense ops; the metric does not exist before Hopper.
_TENSOR_FP8 = "sm__ops_path_tensor_src_fp8_sparsity_off.sum"


def _flops(add: Series, mul: Series, fma: Series, hz: Series, dur: Series) -> Series:
    # ncu's roofline: achieved = (add + mul + 2 * fma) per elapsed cycle x cycles per second;
    # per-cycle values are per SMSP summed over the GPU.
    return (add + mul + 2.0 * fma) * hz * dur * 1e-9


QUANTITIES: tuple[Quantity, ...] = (
    # --- time and throughput (SpeedOfLight) ---
    # A negative time is no time (a damaged or edited export): missing, and the reader warns.
    Quantity("duration_ns", "ns", "GPU time",
             (f((_DUR,), lambda d: d.where(d >= 0), "GPU time (missing where negative)"),)),
    Quantity("sm_pct", "%", "compute (SM) throughput",
             (m("sm__throughput.avg.pct_of_peak_sustained_elapsed"),)),
    Quantity("mem_pct", "%", "memory throughput",
             (m("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),)),
    Quantity("dram_pct", "%", "DRAM throughput",
             (m("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
              m("dram__throughput.avg.pct_of_peak_sustained_elapsed"))),
    Quantity("l1_pct", "%", "L1/TEX throughput",
             (m("l1tex__throughput.avg.pct_of_peak_sustained_active"),
              m("l1tex__throughput.avg.pct_of_peak_sustained_elapsed"))),
    Quantity("l2_pct", "%", "L2 throughput",
             (m("lts__throughput.avg.pct_of_peak_sustained_elapsed"),)),
    Quantity("dram_read_bytes", "byte", "DRAM bytes read", (m("dram__bytes_read.sum"),)),
    Quantity("dram_write_bytes", "byte", "DRAM bytes written", (m("dram__bytes_write.sum"),)),
    Quantity("dram_bytes", "byte", "DRAM bytes",
             (f(("dram__bytes_read.sum", "dram__bytes_write.sum"), _sum, "read + write"),
              m("dram__bytes.sum"),
              f(("dram__bytes.sum.per_second", _DUR), lambda b, d: b * d * 1e-9,
                "bytes/s x duration"))),
    Quantity("dram_bandwidth", "byte/s", "DRAM bandwidth",
             (m("dram__bytes.sum.per_second"),)),
    Quantity("l2_bytes", "byte", "L2 bytes (L1 <-> L2)",
             (f(("lts__t_sectors_srcunit_tex.sum",), lambda s: 32.0 * s, "32 x L2 sectors"),
              f(("lts__t_sectors.sum",), lambda s: 32.0 * s, "32 x L2 sectors"))),
    Quantity("l1_bytes", "byte", "L1 bytes (global/local/shared writeback)",
             (f(("derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second", _DUR),
                lambda b, d: b * d * 1e-9, "writeback bytes/s x duration"),)),
    Quantity("l2_cache_bytes", "byte", "L2 cache size", (m("device__attribute_l2_cache_size"),)),
    Quantity("l1_hit_pct", "%", "L1 hit rate", (m("l1tex__t_sector_hit_rate.pct"),)),
    Quantity("l2_hit_pct", "%", "L2 hit rate", (m("lts__t_sector_hit_rate.pct"),)),
    # --- launch and occupancy (LaunchStats, Occupancy) ---
    Quantity("block_size", "thread", "threads per block", (m("launch__block_size"),)),
    Quantity("grid_size", "block", "blocks in the grid", (m("launch__grid_size"),)),
    Quantity("sm_count", "SM", "SMs on the device",
             (m("device__attribute_multiprocessor_count"), m("launch__sm_count"))),
    Quantity("waves_per_sm", "", "waves per SM", (m("launch__waves_per_multiprocessor"),)),
    Quantity("registers_per_thread", "register/thread", "registers per thread",
             (m("launch__registers_per_thread"),)),
    Quantity("shared_mem_per_block", "byte/block", "shared memory per block (static + dynamic)",
             (f(("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
                _sum, "static + dynamic"),)),
    Quantity("theoretical_occupancy_pct", "%", "theoretical occupancy",
             (m("sm__maximum_warps_per_active_cycle_pct"),)),
    Quantity("achieved_occupancy_pct", "%", "achieved occupancy",
             (m("sm__warps_active.avg.pct_of_peak_sustained_active"),)),
    Quantity("issue_active", "inst/cycle", "issue slots busy per scheduler",
             (m("smsp__issue_active.avg.per_cycle_active"),)),
    Quantity("eligible_warps", "warp", "eligible warps per scheduler",
             (m("smsp__warps_eligible.avg.per_cycle_active"),)),
    Quantity("stall_long_scoreboard", "cycle", "long-scoreboard stall cycles per issue",
             (m("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"),)),
    Quantity("stall_lg_throttle", "cycle", "LSU-queue stall cycles per issue",
             (m("smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"),)),
    Quantity("stall_branch_resolving", "cycle", "branch-resolving stall cycles per issue",
             (m("smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio"),)),
    Quantity("stall_mio_throttle", "cycle", "MIO-queue stall cycles per issue",
             (m("smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"),)),
    Quantity("stall_short_scoreboard", "cycle", "short-scoreboard stall cycles per issue",
             (m("smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"),)),
    Quantity("stall_math_pipe", "cycle", "math-pipe-throttle stall cycles per issue",
             (m("smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"),)),
    Quantity("stall_barrier", "cycle", "barrier stall cycles per issue (waits at __syncthreads)",
             (m("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"),)),
    Quantity("cycles_per_issue", "cycle", "cycles between two issues of a warp",
             (m("smsp__average_warp_latency_per_inst_issued.ratio"),)),
    # --- memory access pattern (MemoryWorkloadAnalysis_Tables, SourceCounters) ---
    Quantity("global_ld_bytes_per_sector", "byte/sector", "bytes used per global-load sector",
             (m("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"),),
             doc="32 means every byte of each 32-byte sector fetched is used."),
    Quantity("global_st_bytes_per_sector", "byte/sector", "bytes used per global-store sector",
             (m("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"),)),
    Quantity("local_ld_bytes_per_sector", "byte/sector", "bytes used per local-load sector",
             (m("smsp__sass_average_data_bytes_per_sector_mem_local_op_ld.ratio"),)),
    Quantity("local_st_bytes_per_sector", "byte/sector", "bytes used per local-store sector",
             (m("smsp__sass_average_data_bytes_per_sector_mem_local_op_st.ratio"),)),
    Quantity("global_ld_traffic_pct", "%", "L1 global-load sectors per 100 L2 sectors",
             (f(("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "lts__t_sectors.sum"),
                _ratio_pct, "100 x global-load sectors / L2 sectors"),),
             doc="Near 0 for kernels that move data with TMA or cp.async bulk copies: a "
                 "bytes-per-sector ratio over almost no load traffic is not a finding."),
    Quantity("global_st_traffic_pct", "%", "L1 global-store sectors per 100 L2 sectors",
             (f(("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "lts__t_sectors.sum"),
                _ratio_pct, "100 x global-store sectors / L2 sectors"),)),
    Quantity("l2_excess_sectors", "sector", "excess global L2 sectors (uncoalesced)",
             (m("derived__memory_l2_theoretical_sectors_global_excessive"),)),
    Quantity("l2_excess_sectors_pct", "%", "excess global L2 sectors (uncoalesced)",
             (f(("derived__memory_l2_theoretical_sectors_global_excessive",
                 "memory_l2_theoretical_sectors_global"), _ratio_pct,
                "excessive / total theoretical sectors"),)),
    Quantity("global_ld_insts", "inst", "global load instructions (warp level)",
             (m("smsp__sass_inst_executed_op_global_ld.sum"),)),
    Quantity("global_st_insts", "inst", "global store instructions (warp level)",
             (m("smsp__sass_inst_executed_op_global_st.sum"),)),
    Quantity("global_bytes_per_inst", "byte", "L1 bytes requested per global ld/st instruction",
             (f(("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                 "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
                 "smsp__sass_inst_executed_op_global_ld.sum",
                 "smsp__sass_inst_executed_op_global_st.sum"),
                lambda sl, ss, il, ist: 32.0 * (sl + ss) / (il + ist),
                "32 x (ld + st sectors) / (ld + st instructions)"),),
             doc="128 for coalesced 4-byte accesses, 512 for 16-byte vector accesses."),
    Quantity("lsu_pipe_pct", "%", "LSU pipe utilization",
             (m("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"),)),
    # --- divergence (WarpStateStats, InstructionStats) ---
    Quantity("threads_per_inst", "thread", "active threads per warp instruction",
             (m("smsp__thread_inst_executed_per_inst_executed.ratio"),)),
    Quantity("threads_per_inst_pred_on", "thread", "predicated-on threads per warp instruction",
             (m("smsp__thread_inst_executed_pred_on_per_inst_executed.ratio"),)),
    Quantity("branch_uniform_pct", "%", "branch targets uniform across the warp",
             (m("smsp__sass_average_branch_targets_threads_uniform.pct"),)),
    Quantity("divergent_branches", "branches", "divergent branch targets",
             (m("smsp__sass_branch_targets_threads_divergent.sum"),
              # the details page prints the per-SMSP average; any value > 0 means divergence
              m("smsp__sass_branch_targets_threads_divergent.avg"))),
    Quantity("instructions", "inst", "warp instructions executed",
             (m("smsp__inst_executed.sum"), m("inst_executed"))),
    # --- local memory (spills, local arrays) ---
    Quantity("local_ld_insts", "inst", "local-memory load instructions",
             (m("smsp__sass_inst_executed_op_local_ld.sum"),
              m("sass__inst_executed_local_loads"))),
    Quantity("local_st_insts", "inst", "local-memory store instructions",
             (m("smsp__sass_inst_executed_op_local_st.sum"),
              m("sass__inst_executed_local_stores"))),
    Quantity("local_insts_pct", "%", "local ld/st share of all instructions",
             (f(("smsp__sass_inst_executed_op_local_ld.sum",
                 "smsp__sass_inst_executed_op_local_st.sum", "smsp__inst_executed.sum"),
                lambda a, b, n: 100.0 * (a + b) / n, "100 x (local ld + st) / instructions"),)),
    Quantity("spill_requests", "request", "register-spill local requests",
             (m("sass__inst_executed_register_spilling"), m("derived__local_spilling_requests"))),
    # --- shared memory (MemoryWorkloadAnalysis_Tables) ---
    Quantity("shared_ld_conflict_pct", "%", "shared-load wavefronts that are bank conflicts",
             (f(("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                 "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"), _ratio_pct,
                "conflicts / wavefronts"),)),
    Quantity("shared_st_conflict_pct", "%", "shared-store wavefronts that are bank conflicts",
             (f(("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                 "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"), _ratio_pct,
                "conflicts / wavefronts"),)),
    Quantity("shared_wavefronts_per_inst", "", "shared wavefronts per shared instruction (n-way)",
             (f(("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                 "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                 "smsp__sass_inst_executed_op_shared_ld.sum",
                 "smsp__sass_inst_executed_op_shared_st.sum"),
                lambda wl, ws, il, ist: (wl + ws) / (il + ist),
                "(ld + st wavefronts) / (ld + st instructions)"),)),
    Quantity("shared_ld_requests", "inst", "shared-load instructions (warp level)",
             (m("smsp__sass_inst_executed_op_shared_ld.sum"),)),
    Quantity("shared_st_requests", "inst", "shared-store instructions (warp level)",
             (m("smsp__sass_inst_executed_op_shared_st.sum"),)),
    Quantity("shared_ld_nway", "", "shared-load wavefronts per request (n-way conflict)",
             (f(("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                 "smsp__sass_inst_executed_op_shared_ld.sum"),
                lambda w, i: w / i.where(i > 0), "wavefronts / instructions"),)),
    Quantity("shared_st_nway", "", "shared-store wavefronts per request (n-way conflict)",
             (f(("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                 "smsp__sass_inst_executed_op_shared_st.sum"),
                lambda w, i: w / i.where(i > 0), "wavefronts / instructions"),)),
    Quantity("shared_excess_wavefronts_pct", "%", "excess shared wavefronts (uncoalesced shared)",
             (f(("derived__memory_l1_wavefronts_shared_excessive",
                 "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"), _ratio_pct,
                "excessive / all shared wavefronts"),)),
    Quantity("shared_insts", "inst", "shared-memory instructions",
             (f(("smsp__sass_inst_executed_op_shared_ld.sum",
                 "smsp__sass_inst_executed_op_shared_st.sum"), _sum, "ld + st"),)),
    # --- atomics (privatization) ---
    Quantity("global_atomic_sectors", "sector", "global atomic/reduction sectors sent to L2",
             (f(("l1tex__m_l1tex2xbar_write_sectors_mem_global_op_atom.sum",
                 "l1tex__m_l1tex2xbar_write_sectors_mem_global_op_red.sum"), _sum,
                "atom + red sectors"),)),
    Quantity("global_red_insts", "inst", "global reduction instructions (RED)",
             (m("smsp__inst_executed_op_global_red.sum"),)),
    Quantity("global_atomic_per_kinst", "", "global atomic sectors per 1000 instructions",
             (f(("l1tex__m_l1tex2xbar_write_sectors_mem_global_op_atom.sum",
                 "l1tex__m_l1tex2xbar_write_sectors_mem_global_op_red.sum",
                 "smsp__inst_executed.sum"),
                lambda a, r, n: 1000.0 * (a + r) / n, "1000 x (atom + red) / instructions"),)),
    Quantity("l2_atomic_busiest_pct", "%", "atomic unit activity of the busiest L2 slice",
             (m("lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed"),)),
    # --- instruction mix, pipes, precision ---
    Quantity("xu_pipe_pct", "%", "XU (transcendental) pipe utilization",
             (m("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),)),
    # ADU: branches, barriers and constant-bank loads whose address differs across a warp
    # (each distinct address is one more pass); busy beside idle math pipes it is the limiter.
    Quantity("adu_pipe_pct", "%", "ADU pipe utilization (branches, barriers, indexed constants)",
             (m("sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active"),)),
    Quantity("adu_over_other_pipes", "", "ADU pipe over the busiest ALU/FMA/LSU/XU pipe",
             (f(("sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active",
                 "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
                 "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                 "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
                 "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
                lambda adu, alu, fma, lsu, xu: adu / pd.concat([alu, fma, lsu, xu], axis=1)
                .max(axis=1).clip(lower=1.0),
                "adu / max(alu, fma, lsu, xu), the denominator at least 1%"),)),
    Quantity("fma_pipe_pct", "%", "FMA pipe utilization",
             (m("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),)),
    Quantity("alu_pipe_pct", "%", "ALU pipe utilization",
             (m("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),)),
    Quantity("fp64_pipe_pct", "%", "FP64 pipe utilization",
             (m("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"),)),
    # Of the elapsed cycles (unlike the other pipes), as ncu's HighPipeUtilization message
    # states it: a details page gives the same value (data/ncu_rule_evidence.toml).
    Quantity("tensor_pipe_pct", "%", "tensor pipe utilization",
             (m("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
              m("sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"))),
    Quantity("fp32_peak_pct", "%", "FP32 throughput, % of the FMA peak",
             (f((*_FP32, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"),
                lambda a, b, c, p: 100.0 * (a + b + 2.0 * c) / (2.0 * p),
                "(fadd + fmul + 2 ffma) / (2 x ffma peak), per cycle"),)),
    Quantity("fp64_peak_pct", "%", "FP64 throughput, % of the DFMA peak",
             (f((*_FP64, "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"),
                lambda a, b, c, p: 100.0 * (a + b + 2.0 * c) / (2.0 * p),
                "(dadd + dmul + 2 dfma) / (2 x dfma peak), per cycle"),)),
    # 2 on data-centre GPUs, 32-64 on consumer ones: what an FP64 kernel gains in FP32.
    Quantity("fp32_over_fp64_peak", "", "FP32 peak rate over the FP64 peak rate",
             (f(("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
                 "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"),
                lambda fp32, fp64: fp32 / fp64.where(fp64 > 0), "ffma peak / dfma peak"),)),
    Quantity("flops_fp32", "FLOP", "FP32 operations (FMA = 2)",
             (f((*_FP32, _SMSP_HZ, _DUR), _flops, "(fadd + fmul + 2 ffma) per cycle x cycles"),)),
    Quantity("flops_fp64", "FLOP", "FP64 operations (FMA = 2)",
             (f((*_FP64, _SMSP_HZ, _DUR), _flops, "(dadd + dmul + 2 dfma) per cycle x cycles"),)),
    Quantity("flops_fp16", "FLOP", "FP16 operations (FMA = 2)",
             (f((*_FP16, _SMSP_HZ, _DUR), _flops, "(hadd + hmul + 2 hfma) per cycle x cycles"),)),
    Quantity("flops_tensor", "FLOP", "tensor-core operations",
             (f((*_TENSOR, _TENSOR_FP8), _sum, "sum of sm__ops_path_tensor_src_*, FP8 included"),
              f(_TENSOR, _sum, "sum of sm__ops_path_tensor_src_* (no FP8 path before Hopper)"))),
)

# Stated only by Nsight Compute's rule messages (data/ncu_rule_evidence.toml): ncu's own
# estimated speedup of an access-pattern message weighs the ratio by how busy the memory level
# is, so it tells a costly pattern from a harmless one on a details-page export.
NCU_STATED: tuple[Quantity, ...] = (
    Quantity("ncu_global_ld_speedup_pct", "%", "ncu's estimated speedup: global-load pattern", ()),
    Quantity("ncu_global_st_speedup_pct", "%", "ncu's estimated speedup: global-store pattern", ()),
    Quantity("ncu_local_speedup_pct", "%", "ncu's estimated speedup: local-memory pattern", ()),
)
QUANTITIES = QUANTITIES + NCU_STATED

BY_NAME: dict[str, Quantity] = {q.name: q for q in QUANTITIES}


def compute_quantities(wide: pd.DataFrame) -> pd.DataFrame:
    """Evaluate every quantity on every launch from metrics alone; columns are quantity names."""
    return compute_with_provenance(wide)[0]


def compute_with_provenance(wide: pd.DataFrame, stated: pd.DataFrame | None = None,
                            invocations: pd.Series | None = None,
                            other_time_ns: float = 0.0,
                            origins: pd.DataFrame | None = None,
                            ) -> tuple[pd.DataFrame, dict[str, set[int]]]:
    """Evaluate every quantity on every launch, and say which values ncu's rules stated.

    ``stated`` holds values Nsight Compute's rule messages state
    (:func:`ncu_advisor.derive.ncu_evidence.ncu_rule_quantities`); they fill a quantity only
    where no metric gives it. The second result maps a quantity to the launches whose value
    came from a rule message (derived quantities inherit it from their inputs).
    ``invocations`` (per launch; 1 each when not given) weighs ``time_share_pct``;
    ``other_time_ns`` is GPU time of launches not in the table (a census's tail), counted
    in the whole. ``origins`` (per launch: ``role`` and ``origin_library``, from
    ``data/origins.toml``) gives ``matrix_product`` and ``library_kernel``.
    """
    out = {}
    from_rule: dict[str, set[int]] = {}
    for q in QUANTITIES:
        value = pd.Series(np.nan, index=wide.index)
        for source in q.sources:
            value = value.fillna(source.compute(wide))
        if stated is not None and q.name in stated.columns:
            filled = value.isna() & stated[q.name].reindex(wide.index).notna()
            if filled.any():
                value = value.fillna(stated[q.name].reindex(wide.index))
                from_rule[q.name] = {int(i) for i in wide.index[filled.to_numpy()]}
        out[q.name] = value
    frame = add_derived(pd.DataFrame(out, index=wide.index))
    frame["time_share_pct"] = time_share_pct(frame["duration_ns"], invocations, other_time_ns)
    if origins is not None:
        known = origins.reindex(wide.index)
        frame["matrix_product"] = (known["role"] == "matmul").astype("float64")
        frame["library_kernel"] = known["origin_library"].astype("float64")
    else:
        frame["matrix_product"] = frame["library_kernel"] = np.nan
    names = (origins.reindex(wide.index)["name"] if origins is not None and "name" in origins
             else None)
    for column, values in name_quantities(names, wide.index).items():
        frame[column] = values
    cc = (origins.reindex(wide.index)["cc"] if origins is not None and "cc" in origins
          else pd.Series(None, index=wide.index, dtype="object"))
    frame["tensor_core_saving_pct"] = tensor_core_saving_pct(
        frame["fp32_peak_pct"], frame["dram_pct"], frame["duration_ns"], cc)
    frame = _one_block(frame)
    for d in DERIVED:
        inherited = set().union(*(from_rule.get(name, set()) for name in d.inputs))
        if inherited:
            from_rule[d.name] = inherited
    return frame, from_rule


# CUTLASS-built tensor-core kernels (cuBLAS and cuDNN dispatch them) name the vector width
# their operand loads were compiled for: `_align8` reads 8 elements (16 bytes of fp16) at a
# time, `_align1` one. cuBLAS falls back to align1/align2 kernels when a leading dimension or
# pointer is not a multiple of 8 elements (a vocabulary of 50257, a 49-token window).
_ALIGN = re.compile(r"_align(\d+)")
_TENSOR_CORE_NAME = re.compile(r"tensorop|wmma|hmma|s1688|s16816|s161616")
# cuDNN's convolution kernels (forward, data and weight gradients; legacy and CUTLASS-built).
_CONVOLUTION_NAME = re.compile(r"cudnn|dgrad|wgrad|fprop|implicit_convolve|conv[123]d")
# PyTorch's memory-efficient attention on FP32 inputs (its flash and cuDNN backends take only
# 16-bit inputs): fmha_cutlassF_f32_* forward, fmha_cutlassB_f32_* backward.
_FP32_ATTENTION_NAME = re.compile(r"fmha_cutlass[FB]_f32")


def name_quantities(names: pd.Series | None, index: pd.Index) -> pd.DataFrame:
    """Per launch, what the kernel's name says (unknown without names).

    ``operand_alignment``: a tensor-core kernel's alignN (elements per load), 0 where the
    name states none (not unknown: the name is always there to read);
    ``convolution_kernel`` and ``fp32_attention_kernel``: 1 or 0.
    """
    if names is None:
        return pd.DataFrame(np.nan, index=index, columns=list(_NAME_INFO))
    text = names.astype(str)
    align = text.str.extract(_ALIGN, expand=False).astype("float64").fillna(0.0)
    return pd.DataFrame({
        "operand_alignment": align.where(text.str.contains(_TENSOR_CORE_NAME), 0.0),
        "convolution_kernel": text.str.contains(_CONVOLUTION_NAME).astype("float64"),
        "fp32_attention_kernel": text.str.contains(_FP32_ATTENTION_NAME).astype("float64"),
    }, index=index)


# Dense TF32 tensor-core FLOP/s over FP32 FMA FLOP/s, by compute capability (datasheets:
# V100/T4 have no TF32, so their FP16 tensor rate with FP32 accumulation; A100 156/19.5;
# A10/L4/L40S about 2 (GeForce parts of 8.6/8.9/12.0 about 1); H100/H200 494/67; B200
# 1100/80). Unknown capabilities take a middle value.
_TF32_OVER_FP32 = {"7.0": 8.0, "7.2": 8.0, "7.5": 8.0, "8.0": 8.0, "8.6": 2.0, "8.7": 2.0,
                   "8.9": 2.0, "9.0": 7.4, "10.0": 14.0, "10.3": 14.0, "12.0": 1.0}
_TF32_DEFAULT = 4.0
# Shares of the peaks a replacement reaches: a library TF32 GEMM about 60% of the tensor
# peak, a stream over the same bytes about 90% of DRAM's.
_TENSOR_EFFICIENCY, _DRAM_EFFICIENCY = 0.6, 0.9


# No kernel runs in less than a few microseconds (launch latency, the GEMM's prologue).
_KERNEL_FLOOR_NS = 2_500.0


def tensor_core_saving_pct(fp32_peak_pct: Series, dram_pct: Series, duration_ns: Series,
                           cc: Series) -> Series:
    """Share of an FP32 matrix product's time that tensor cores (TF32) would save.

    The FP32 work runs ``ratio`` times faster on the tensor cores at 60% of their peak, but
    not faster than the kernel's DRAM bytes stream at 90% of the peak, nor under 2.5 us:
    ``100 x (1 - max(fp32% / (ratio x 60), dram% / 90, 2.5 us / duration))``, 0 to 90%.
    """
    ratio = cc.map(lambda c: _TF32_OVER_FP32.get(str(c), _TF32_DEFAULT)).astype("float64")
    compute = fp32_peak_pct / (ratio * 100.0 * _TENSOR_EFFICIENCY)
    memory = dram_pct.fillna(0.0) / (100.0 * _DRAM_EFFICIENCY)
    floor = _KERNEL_FLOOR_NS / duration_ns.where(duration_ns > 0)
    return (100.0 * (1.0 - np.maximum(np.maximum(compute, memory), floor))).clip(0.0, 90.0)


def _one_block(frame: pd.DataFrame) -> pd.DataFrame:
    """The same table as one float64 array (launch x quantity).

    Built a column at a time, the frame is ~20 blocks; every reader of all its rows (the rule
    engine, the JSON writer) then copied it whole (~40 MB at 50,000 launches). One block is
    read in place.
    """
    if not all(dtype == np.float64 for dtype in frame.dtypes):
        return frame
    block = np.empty((frame.shape[1], frame.shape[0]))
    for i, name in enumerate(frame.columns):
        block[i] = frame[name].to_numpy()
    return pd.DataFrame(block.T, index=frame.index, columns=frame.columns, copy=False)


@dataclass(frozen=True)
class Derived:
    """A quantity computed from other quantities; its inputs are exactly its formula's inputs.

    ``routes``: where the formula has a fallback, the groups of inputs each sufficient on its
    own (the first is the preferred one, what to collect); none means all inputs are needed.
    """

    name: str
    unit: str
    label: str
    inputs: tuple[str, ...]
    fn: Callable[..., Series]
    routes: tuple[tuple[str, ...], ...] = ()


def _per(a: Series, b: Series) -> Series:
    """``a / b``, undefined (NaN) where ``b`` is not positive."""
    return a / b.where(b > 0)


def _sum_any(*cols: Series) -> Series:
    """Sum of the known values (NaN only when all are unknown)."""
    return pd.concat(cols, axis=1).sum(axis=1, min_count=1)


def _fp64_share_pct(flops_fp64: Series, flops_total: Series, fp64_peak_pct: Series,
                    fp32_peak_pct: Series, fp32_over_fp64: Series) -> Series:
    """FP64 share of the floating-point work, from the FLOP counts or ncu's FP roofline message.

    A details page states the two shares of peak and the peak ratio: FP64 FLOPs over FP32
    FLOPs are ``fp64% / (ratio x fp32%)``. It states no FP16 or tensor share, so there the
    share is of the FP32 and FP64 work alone.
    """
    counted = 100.0 * _per(flops_fp64, flops_total)
    stated = 100.0 * _per(fp64_peak_pct, fp64_peak_pct + fp32_over_fp64 * fp32_peak_pct)
    return counted.fillna(stated)


def _fp64_saving_pct(share_pct: Series, fp32_over_fp64: Series) -> Series:
    """Share of an FP64 kernel's time that float would save: ``share x (1 - 1 / ratio)``.

    The FP64 work takes ``ratio`` times the FP32 time whether the pipe's throughput or its
    latency limits it (double division and square root are instruction sequences about twice
    as long: an n-body interaction issued 58.6 warp instructions in double, 34.5 in float), and
    at ratio 2 the halved bytes of a memory-bound kernel give the same half. ``ratio`` 2 where
    unknown: the data-centre rate, the smaller gain. Dev pair, a double Newton iteration at 93%
    FP64: estimate 249 us, 222 us saved.
    """
    ratio = fp32_over_fp64.fillna(2.0).clip(lower=1.0)
    return (share_pct * (1.0 - 1.0 / ratio)).clip(0.0, 90.0)


def _tail_waste_pct(waves: Series) -> Series:
    from .launch_shape import tail_idle_pct

    return tail_idle_pct(waves)


DERIVED: tuple[Derived, ...] = (
    Derived("flops_total", "FLOP", "floating-point operations, all precisions",
            ("flops_fp32", "flops_fp64", "flops_fp16", "flops_tensor"), _sum_any),
    Derived("arith_intensity_dram", "FLOP/byte", "arithmetic intensity (DRAM)",
            ("flops_total", "dram_bytes"), _per),
    Derived("shared_conflict_pct", "%", "shared wavefronts that are bank conflicts",
            ("shared_ld_conflict_pct", "shared_st_conflict_pct"),
            lambda ld, st: pd.concat([ld, st], axis=1).max(axis=1)),
    Derived("occupancy_gap_pct", "%", "theoretical minus achieved occupancy",
            ("theoretical_occupancy_pct", "achieved_occupancy_pct"), lambda t, a: t - a),
    Derived("dram_read_write_ratio", "", "DRAM bytes read per byte written",
            ("dram_read_bytes", "dram_write_bytes"), _per),
    Derived("l2_to_dram_ratio", "", "L2 bytes per DRAM byte", ("l2_bytes", "dram_bytes"), _per),
    Derived("max_throughput_pct", "%", "max of compute and memory throughput",
            ("sm_pct", "mem_pct"),
            lambda sm, mem: pd.concat([sm, mem], axis=1).max(axis=1, skipna=False)),
    # Memory or the busiest L2 slice's atomic unit (contended atomics): what is left of the
    # busier one (the atomic unit counts only where the input has it).
    Derived("memory_headroom_pct", "%", "memory throughput left below the peak (atomics too)",
            ("mem_pct", "l2_atomic_busiest_pct"),
            lambda mem, atomic: (100.0 - pd.concat([mem, atomic], axis=1).max(axis=1))
            .clip(lower=0.0).where(mem.notna())),
    Derived("l1_to_dram_ratio", "", "L1 bytes per DRAM byte", ("l1_bytes", "dram_bytes"), _per),
    Derived("fp64_flop_share_pct", "%", "FP64 share of floating-point work",
            ("flops_fp64", "flops_total", "fp64_peak_pct", "fp32_peak_pct",
             "fp32_over_fp64_peak"), _fp64_share_pct,
            routes=(("flops_fp64", "flops_total"),
                    ("fp64_peak_pct", "fp32_peak_pct", "fp32_over_fp64_peak"))),
    Derived("fp64_saving_pct", "%", "time FP32 arithmetic and storage would save (estimate)",
            ("fp64_flop_share_pct", "fp32_over_fp64_peak"), _fp64_saving_pct),
    Derived("fp32_ops_per_thread_inst", "", "FP32 operations per executed thread instruction",
            ("flops_fp32", "instructions"), lambda f, i: _per(f, 32.0 * i)),
    # FP32 FMA warp instructions ~ flops / 2 / 32: how many global loads feed each FMA.
    Derived("global_ld_per_fma", "", "global load instructions per FP32 FMA instruction",
            ("global_ld_insts", "flops_fp32"), lambda ld, f: _per(64.0 * ld, f)),
    Derived("dram_bytes_per_thread", "byte", "DRAM bytes per launched thread",
            ("dram_bytes", "grid_size", "block_size"), lambda d, g, b: _per(d, g * b)),
    Derived("shared_per_inst", "", "shared-memory requests per executed warp instruction",
            ("shared_ld_requests", "shared_st_requests", "instructions"),
            lambda ld, st, i: _per(_sum_any(ld, st), i)),
    Derived("barrier_stall_share_pct", "%", "share of the cycles between issues spent at barriers",
            ("stall_barrier", "cycles_per_issue"), lambda b, c: 100.0 * _per(b, c)),
    Derived("wave_fill_pct", "%", "how much of one full wave the grid fills", ("waves_per_sm",),
            lambda w: (100.0 * w).clip(upper=100.0)),
    Derived("sm_fill_pct", "%", "SMs given at least one block", ("grid_size", "sm_count"),
            lambda g, n: (100.0 * g / n).clip(upper=100.0)),
    Derived("wave_tail_waste_pct", "%", "time lost to the partial last wave (estimate)",
            ("waves_per_sm",), _tail_waste_pct),
    # What the tail can cost is also bounded by the busiest unit's headroom: a kernel at 83% of
    # a memory level over its whole run, tail included, is at most 17% from that roof (the
    # tail's few blocks get the bandwidth the idle SMs leave).
    Derived("wave_tail_saving_pct", "%", "time a whole number of waves would save (estimate)",
            ("wave_tail_waste_pct", "max_throughput_pct"),
            lambda waste, busiest: np.minimum(waste, (100.0 - busiest.fillna(0.0)).clip(0.0))),
    Derived("block_lane_waste_pct", "%", "idle lanes in the last warp of each block",
            ("block_size",),
            lambda b: 100.0 * (np.ceil(b / 32.0) * 32.0 - b) / (np.ceil(b / 32.0) * 32.0)),
    Derived("dram_write_over_l2", "", "DRAM bytes written per byte of L2 cache",
            ("dram_write_bytes", "l2_cache_bytes"), lambda w, c: w / c),
    Derived("memory_bound", "", "memory-bound (1) or not (0)", ("sm_pct", "mem_pct"),
            lambda sm, mem: _bound_is(sm, mem, "memory")),
    Derived("compute_bound", "", "compute-bound (1) or not (0)", ("sm_pct", "mem_pct"),
            lambda sm, mem: _bound_is(sm, mem, "compute")),
    Derived("latency_bound", "", "latency-bound (1) or not (0)", ("sm_pct", "mem_pct"),
            lambda sm, mem: _bound_is(sm, mem, "latency")),
)


def _bound_is(sm: Series, mem: Series, kind: str) -> Series:
    from .bound import bound_of

    bound = bound_of(sm, mem)
    return (bound == kind).astype("float64").where(bound.notna())


def time_share_pct(duration_ns: Series, invocations: Series | None = None,
                   other_time_ns: float = 0.0) -> Series:
    """Each launch's share of the application's GPU time, in percent: THE time share.

    A launch counts ``duration x invocations`` (a per-kernel summary row stands for all its
    invocations); the JSON's ``time_share``, the hot-spot rule and reports all read this
    quantity. Unknown where the duration is.
    """
    count = (pd.Series(1.0, index=duration_ns.index) if invocations is None
             else invocations.reindex(duration_ns.index).astype("float64"))
    time = duration_ns.astype("float64") * count
    total = np.nansum(time) + other_time_ns
    return 100.0 * time / total if total > 0 else time * np.nan


# Not a Derived: the share needs every launch's time and invocation count, not one row.
_TIME_SHARE = ("%", "share of the application's GPU time", ("duration_ns",))
# Not a metric: the kernel's name says it computes a matrix product (a GEMM, convolution or
# attention kernel, the `matmul` role of data/origins.toml), so a precision or tensor-core
# change applies to it even when its FMA pipe is not the busiest unit.
_MATRIX_PRODUCT = ("", "1 when the kernel is a matrix product by name (GEMM, conv, attention)", ())
_LIBRARY = ("", "1 when the kernel is a library's (data/origins.toml), 0 for user code", ())
# Not metrics: read from the kernel's name (name_quantities).
_NAME_INFO = {
    "operand_alignment": ("", "elements per operand load a tensor-core kernel was built for (its "
                          "name's alignN; 0 where the name states none)", ()),
    "convolution_kernel": ("", "1 when the kernel is a convolution by name (cuDNN's "
                           "fprop/dgrad/wgrad)", ()),
    "fp32_attention_kernel": ("", "1 when the kernel is PyTorch's memory-efficient attention on "
                              "FP32 inputs (by name)", ()),
}
# Not a Derived: the tensor-core rate over the FP32 rate depends on the launch's device.
_TENSOR_CORE_SAVING = ("%", "share of the time TF32 tensor cores would save (compute or DRAM "
                       "floor)", ("fp32_peak_pct", "dram_pct", "duration_ns"))
DERIVED_INFO: dict[str, tuple[str, str, tuple[str, ...]]] = {
    **{d.name: (d.unit, d.label, d.inputs) for d in DERIVED}, "time_share_pct": _TIME_SHARE,
    "matrix_product": _MATRIX_PRODUCT, "library_kernel": _LIBRARY,
    **_NAME_INFO,
    "tensor_core_saving_pct": _TENSOR_CORE_SAVING}


def add_derived(frame: pd.DataFrame) -> pd.DataFrame:
    """Add every derived quantity the frame does not already hold (in place; returned).

    In definition order, so a derived quantity may read earlier ones. A missing input column
    counts as unknown (NaN).
    """
    for d in DERIVED:
        if d.name in frame:
            continue
        cols = [frame[n] if n in frame else pd.Series(np.nan, index=frame.index)
                for n in d.inputs]
        with np.errstate(divide="ignore", invalid="ignore"):
            frame[d.name] = d.fn(*cols)
    return frame


def unit_of(name: str) -> str:
    """Return the unit of a quantity."""
    if name in BY_NAME:
        return BY_NAME[name].unit
    return DERIVED_INFO[name][0]


def label_of(name: str) -> str:
    """Return the human label of a quantity."""
    if name in BY_NAME:
        return BY_NAME[name].label
    return DERIVED_INFO[name][1]


def metrics_of(name: str) -> tuple[str, ...]:
    """Return the ncu metrics a quantity needs (its preferred source), recursively."""
    if name in BY_NAME:
        return BY_NAME[name].primary_metrics
    return tuple(dict.fromkeys(mm for dep in routes_of(name)[0] for mm in metrics_of(dep)))


def inputs_of(name: str) -> tuple[str, ...]:
    """The quantities a derived quantity is computed from (none for a measured one)."""
    return () if name in BY_NAME else DERIVED_INFO[name][2]


_ROUTES = {d.name: d.routes for d in DERIVED if d.routes}


def routes_of(name: str) -> tuple[tuple[str, ...], ...]:
    """The groups of inputs each sufficient for a derived quantity, preferred first.

    One group, all its inputs, unless the quantity has a fallback; none for a measured one.
    """
    if name in BY_NAME:
        return ()
    return _ROUTES.get(name) or (inputs_of(name),)


def known(name: str) -> bool:
    """Return whether a name is a defined quantity."""
    return name in BY_NAME or name in DERIVED_INFO


def quantity_names() -> list[str]:
    """Every quantity a rule may name, in definition order."""
    return [*BY_NAME, *DERIVED_INFO]
