"""Does closing a report in NVIDIA's ncu_report free what reading its source lines loaded?

Run on the GPU machine from the repository root: ``python3
scripts/probe/ncu_rep_native_memory.py REPORT.ncu-rep`` (a report of 48+ launches). It reads the
source lines of 16 launches on each of three fresh loads, printing the resident set before and
after closing each load, then which calls load the memory. On the H200 (ncu 2025.3.1, a 257 MB
report of 96 PyTorch launches, 2026-12-01) nothing was freed (661, 844, 1,225 MB after each
close): the reader reads source lines in a child process per 16 launches instead.
"""

import gc
import sys
import time

sys.path.insert(0, "/opt/nvidia/nsight-compute/2025.3.1/extras/python")
sys.path.insert(0, "ncu_advisor/readers")
import ncu_rep_child  # noqa: E402
import ncu_report  # noqa: E402


def rss_mb() -> int:
    with open("/proc/self/status") as fh:
        return int(fh.read().split("VmRSS:")[1].split()[0]) // 1024


def main(path: str) -> None:
    start = time.time()
    for chunk in range(3):
        ctx = ncu_report.load_report(path)
        rng = ctx.range_by_idx(0)
        for a in range(chunk * 16, chunk * 16 + 16):
            ncu_rep_child.source_lines_of_action(rng.action_by_idx(a), a)
        print("chunk", chunk, "rss before close", rss_mb(), flush=True)
        del rng, ctx
        gc.collect()
        print("chunk", chunk, "rss after close", rss_mb(), f"{time.time() - start:.1f}s")
    rng = ncu_report.load_report(path).range_by_idx(0)
    for what, first in (("correlation ids", 0), ("source_info", 0), ("sass_by_pc", 16)):
        before = rss_mb()
        for a in range(first, first + 16):
            action = rng.action_by_idx(a)
            metric = action["inst_executed"]
            pcs = metric.correlation_ids()
            for i in range(min(metric.num_instances(), 50) if what != "correlation ids" else 0):
                pc = pcs.as_uint64(i)
                action.source_info(pc) if what == "source_info" else action.sass_by_pc(pc)
        print(f"16 launches, {what}: rss {before} -> {rss_mb()} MB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
