#!/usr/bin/env bash
# GPU probe (issue 13 follow-up): which families of the advisor set's metrics cost replay
# passes. One kernel (the coalescing demo's strided copy), ncu --metrics with each subset,
# passes read from ncu's "- N passes" line. Writes $OUT/pass_probe.txt.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
. scripts/gpu_lib.sh   # wheels
wheels
python3 - <<'PY' > /tmp/subsets.txt
from ncu_advisor import collect
m = [x for x in collect.advisor_metrics() if not x.startswith("derived__")]
per_pc = {"inst_executed", "thread_inst_executed", "memory_type", "memory_access_type",
          "memory_l1_wavefronts_shared", "memory_l1_wavefronts_shared_ideal",
          "memory_l2_theoretical_sectors_global", "memory_l2_theoretical_sectors_global_ideal"}
sass = [x for x in m if x.startswith(("smsp__sass_", "sass__"))]
subsets = {
    "all": m,
    "no_per_pc": [x for x in m if x not in per_pc],
    "no_sass_no_per_pc": [x for x in m if x not in per_pc and x not in sass],
    "sass_only": sass,
    "per_pc_only": sorted(per_pc & set(m)),
    "smsp_not_sass": [x for x in m if x.startswith("smsp__") and x not in sass],
    "sm": [x for x in m if x.startswith("sm__")],
    "l1tex": [x for x in m if x.startswith("l1tex__")],
    "lts_dram_gpu": [x for x in m if x.startswith(("lts__", "dram__", "gpu__"))],
    "launch_device": [x for x in m if x.startswith(("launch__", "device__"))],
}
for name, ms in subsets.items():
    print(name, len(ms), ",".join(ms))
PY
{ ncu --version | tail -1; date -u; } > $OUT/pass_probe.txt
while read -r name n metrics; do
  log=/tmp/probe_$name.log
  timeout 90 ncu --clock-control none --profile-from-start off -c 1 --metrics "$metrics" \
      python3 -m ncu_advisor.demos once coalescing > $log 2>&1
  passes=$(grep -o -- '- [0-9]* pass' $log | head -1)
  err=$(grep -m1 "==ERROR==" $log)
  echo "$name metrics=$n passes='$passes' $err" | tee -a $OUT/pass_probe.txt
done < /tmp/subsets.txt
