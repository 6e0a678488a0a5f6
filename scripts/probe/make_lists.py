"""Write the metric lists scripts/gpu_pass_greedy.sh probes (no GPU needed).

cumulative.txt: the advisor set's collectable metrics, the launch/device attributes as one group
first, then the SpeedOfLight throughputs, then by unit (DRAM/GPU, L2, L1, SM, SMSP, SASS,
per-instruction); singles.txt: its hardware counters; variants/: candidate sets (the set, with
or without groups of metrics). The lists committed beside this file were written by this code
on 2026-12-01 from the set of that time: cumulative.txt and singles.txt before anything was
left out and before the FP8 path and the elapsed-cycle L1 throughput were added; variants/ with
those added and five metrics left out (the four of collect.LEFT_OUT_FOR_PASSES and the
active-cycle L1 throughput, restored after variant b showed it costs no pass). Running it now
writes lists for the current set. Run from the repository root:
PYTHONPATH=. python scripts/probe/make_lists.py
"""

from __future__ import annotations

from pathlib import Path

from ncu_advisor.profiling import sections as collect

HERE = Path(__file__).resolve().parent
TENSOR = [f"sm__ops_path_tensor_src_{s}.sum" for s in
          ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "int8")] + [
    "sm__ops_path_tensor_src_fp8_sparsity_off.sum"]
PER_INSTRUCTION = {"inst_executed", "thread_inst_executed", "memory_type", "memory_access_type",
                   "memory_l1_wavefronts_shared", "memory_l1_wavefronts_shared_ideal",
                   "memory_l2_theoretical_sectors_global",
                   "memory_l2_theoretical_sectors_global_ideal"}
FIRST = ["gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
         "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]
L1_ACTIVE = "l1tex__throughput.avg.pct_of_peak_sustained_active"


def _family(metric: str) -> tuple[int, str]:
    prefixes = (("dram__", "gpu__"), ("lts__",), ("l1tex__",), ("sm__",))
    for rank, prefix in enumerate(prefixes):
        if metric.startswith(prefix):
            return rank, metric
    if metric.startswith("smsp__") and "sass" not in metric:
        return 4, metric
    return (5 if "sass" in metric else 6), metric


def main() -> None:
    metrics = [m for m in collect.advisor_metrics() if m not in collect.DERIVED]
    attributes = [m for m in metrics if m.startswith(("launch__", "device__"))]
    rest = sorted((m for m in metrics if m not in attributes and m not in FIRST), key=_family)
    (HERE / "cumulative.txt").write_text("\n".join([",".join(attributes), *FIRST, *rest]) + "\n")
    hardware = [m for m in FIRST + rest if _family(m)[0] <= 4]
    (HERE / "singles.txt").write_text("\n".join(hardware) + "\n")
    variants = {
        "a_advise": metrics,
        "b_plus_l1_active": metrics + [L1_ACTIVE] * (L1_ACTIVE not in metrics),
        "c_no_fp8": [m for m in metrics if "fp8" not in m],
        "d_no_int8_fp64": [m for m in metrics if m not in TENSOR[3:5]],
        "e_no_tensor": [m for m in metrics if m not in TENSOR],
        "f_no_tensor_no_perpc": [m for m in metrics if m not in TENSOR
                                 and m not in PER_INSTRUCTION],
        "h_no_fp8_int8_fp64": [m for m in metrics if m not in TENSOR[3:]],
    }
    (HERE / "variants").mkdir(exist_ok=True)
    for name, chosen in variants.items():
        (HERE / "variants" / f"{name}.txt").write_text(",".join(chosen) + "\n")


if __name__ == "__main__":
    main()
