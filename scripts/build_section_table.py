"""Build ncu_advisor/data/metric_sections.csv: which ncu section collects which metric.

Usage: python scripts/build_section_table.py SECTIONS_DIR
SECTIONS_DIR is Nsight Compute's own `sections/` folder (2025.3.1 was used; the GPU capture
script packs a copy). The smallest `--set` that includes each section comes from
`ncu --list-sets` of the same version (basic < detailed < full).
"""

import csv
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "ncu_advisor" / "data" / "metric_sections.csv"
# From `ncu --list-sets` (2025.3.1): the sections in each set, smallest set first.
SETS = {
    "basic": {"LaunchStats", "Occupancy", "SpeedOfLight", "WorkloadDistribution"},
    "detailed": {"ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis",
                 "MemoryWorkloadAnalysis_Chart", "SourceCounters", "SpeedOfLight_RooflineChart"},
    "full": {"InstructionStats", "MemoryWorkloadAnalysis_Tables", "NumaAffinity", "Nvlink_Tables",
             "Nvlink_Topology", "PmSampling", "SchedulerStats", "WarpStateStats",
             "SpeedOfLight_HierarchicalDoubleRooflineChart",
             "SpeedOfLight_HierarchicalHalfRooflineChart",
             "SpeedOfLight_HierarchicalSingleRooflineChart",
             "SpeedOfLight_HierarchicalTensorRooflineChart"},
}


def smallest_set(section: str) -> str:
    for name in ("basic", "detailed", "full"):
        if section in SETS[name]:
            return name
    return ""


def main(folder: str) -> None:
    rows = {}
    for path in sorted(Path(folder).glob("*.section")):
        text = path.read_text()
        ident = re.search(r'^Identifier:\s*"([^"]+)"', text, re.M).group(1)
        for metric in re.findall(r'Name:\s*"([a-z0-9_.]+)"', text):
            # Keep the section in the smallest set that collects the metric.
            best = rows.get(metric)
            order = ["basic", "detailed", "full", ""]
            if best is None or order.index(smallest_set(ident)) < order.index(best[1]):
                rows[metric] = (ident, smallest_set(ident))
    with OUT.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["metric", "section", "set"])
        for metric in sorted(rows):
            w.writerow([metric, *rows[metric]])
    print(f"wrote {len(rows)} metrics to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
