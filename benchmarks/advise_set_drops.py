"""What leaving metric groups out of the advisor set would cost, on the committed captures.

Offline (no GPU): for every full-set capture that tests/test_advise_set.py checks, the findings of
the advisor set's metrics against the same minus one group (the per-instruction counters, the
tensor-path counters, ...); then, for every launch with tensor work, the tensor FLOPs the
counters give against an estimate from tensor-pipe utilization x the FP16 tensor peak.
Run: python benchmarks/advise_set_drops.py   (BENCHMARKS.md, "Profiling cost", quotes it)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_advise_set import DEMO_NAMES, FOREIGN_NAMES, _files, findings_of, reduced  # noqa: E402

from ncu_advisor.analysis import analyze  # noqa: E402
from ncu_advisor.profiling import sections as collect  # noqa: E402
from ncu_advisor.readers import read_report  # noqa: E402

TENSOR = [f"sm__ops_path_tensor_src_{s}.sum" for s in
          ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "int8")] + [
    "sm__ops_path_tensor_src_fp8_sparsity_off.sum"]
PER_INSTRUCTION = ["inst_executed", "thread_inst_executed", "memory_type", "memory_access_type",
                   "memory_l1_wavefronts_shared", "memory_l1_wavefronts_shared_ideal",
                   "memory_l2_theoretical_sectors_global",
                   "memory_l2_theoretical_sectors_global_ideal",
                   *[d for d in collect.DERIVED if d.startswith("derived__memory_")]]
GROUPS = {"tensor paths": TENSOR, "per-instruction": PER_INSTRUCTION}
PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
PEAK = "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained"


def main() -> None:
    print("findings lost (-) or gained (+) when a group is left out:")
    ratios = []
    for name in DEMO_NAMES + FOREIGN_NAMES:
        report = read_report(_files(name))
        base = findings_of(analyze(reduced(report, [])))
        changes = []
        for group, metrics in GROUPS.items():
            found = findings_of(analyze(reduced(report, metrics)))
            if found != base:
                changes.append(f"{group}: -{sorted(base - found)} +{sorted(found - base)}")
        print(f"  {name} ({len(base)} findings): {'; '.join(changes) or 'same'}")
        wide = report.wide()
        hz, dur = wide["sm__cycles_elapsed.avg.per_second"], wide["gpu__time_duration.sum"]
        measured = wide[[t for t in TENSOR if t in wide.columns]].fillna(0).sum(axis=1)
        estimate = wide[PIPE] / 100 * wide[PEAK] * hz * dur * 1e-9
        names = report.launches.set_index("launch")["short_name"]
        for launch in wide.index[measured > 0]:
            ratios.append((name, names[launch], estimate[launch] / measured[launch]))
    print("tensor FLOPs, estimate from pipe utilization / counted:")
    for name, kernel, ratio in ratios:
        print(f"  {name}: {kernel[:60]}: {ratio:.2f}")


if __name__ == "__main__":
    main()
