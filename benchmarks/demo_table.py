"""Print the demo timing table of BENCHMARKS.md from a `demos time all --json` result.

Usage: python benchmarks/demo_table.py benchmarks/results/demos_h200_2026-11-29.json
"""

import json
import sys


def _speedup(x: float) -> str:
    return f"{x:.2f}x" if x < 1 else f"{x:.1f}x"


def main(path: str) -> None:
    data = json.load(open(path))
    gpu = data["gpu"]
    print(f"GPU: {gpu['name']} ({gpu['sm_count']} SMs, CuPy {gpu['cupy']}); "
          f"measured copy roof {data['copy_roof_gbs']:,.0f} GB/s; {data['repeats']} timed runs "
          f"after {data['warmup']} warm-ups, median; run {data['created']}")
    print()
    print("| checklist id | GPU | problem | bad ms | good ms | speedup | good GB/s "
          "| good % of roof | command |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|")
    for d in data["demos"]:
        bad, good = d["bad"], d["good"]
        print(f"| {d['name']} | {gpu['name'].removeprefix('NVIDIA ')} | {d['problem']} "
              f"| {bad['median_ms']:.3f} | {good['median_ms']:.3f} | {_speedup(d['speedup'])} "
              f"| {good['gbs']:,.0f} | {good['pct_of_roof']:.0f}% "
              f"| `ncu-advise demo {d['name']}` |")


if __name__ == "__main__":
    main(sys.argv[1])
