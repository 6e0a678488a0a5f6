"""Per-launch measurements of a capture, for labelling it by hand without running any rule.

Prints, for every launch of a raw export (and the ncu rule results of its details export):
duration, shape, throughputs, occupancy, sector use, pipe use, and ncu's own OPT/WRN titles.
The labels of a held-out set (``tests/data/holdout_labels.toml``) were written from this
output and the program's source, before the tool's findings on the capture were looked at.

Usage: ``python scripts/metric_digest.py RAW.csv[.gz] [DETAILS.csv[.gz]]``.
"""

from __future__ import annotations

import sys

from ncu_advisor import read_report
from ncu_advisor.derive.quantities import compute_with_provenance

SHOWN = [("duration_ns", "dur_us", 1e-3), ("dram_pct", "dram%", 1), ("sm_pct", "sm%", 1),
         ("mem_pct", "mem%", 1), ("achieved_occupancy_pct", "occ%", 1),
         ("theoretical_occupancy_pct", "th_occ%", 1),
         ("global_ld_bytes_per_sector", "ldB/sec", 1),
         ("global_st_bytes_per_sector", "stB/sec", 1), ("threads_per_inst", "thr/inst", 1),
         ("tensor_pipe_pct", "tensor%", 1), ("flops_fp32", "fp32GF", 1e-9),
         ("arith_intensity_dram", "AI", 1), ("shared_conflict_pct", "shconf%", 1),
         ("local_ld_insts", "local_ld", 1), ("waves_per_sm", "waves", 1),
         ("l1_hit_pct", "l1hit%", 1), ("dram_bytes", "dramMB", 1e-6)]


def main(raw: str, details: str | None = None) -> None:
    report = read_report(raw)
    quantities, _ = compute_with_provenance(report.wide())
    rules = read_report(details).ncu_rules if details else None
    for row in report.launches.itertuples():
        q = quantities.loc[row.launch]
        facts = " ".join(f"{label}={q[name] * scale:.3g}" for name, label, scale in SHOWN
                         if name in q and q[name] == q[name])
        print(f"#{row.id} {row.short_name} grid={row.grid_x}x{row.grid_y}x{row.grid_z} "
              f"block={row.block_x}x{row.block_y}x{row.block_z}\n    {facts}")
        print(f"    {row.name[:160]}")
        if rules is not None:
            mine = rules[(rules["launch"] == row.launch) & rules["type"].isin(["OPT", "WRN"])]
            for r in mine.itertuples():
                print(f"    ncu {r.type} {r.rule}: {r.title} ({r.speedup})")


if __name__ == "__main__":
    main(*sys.argv[1:3])
