#!/usr/bin/env bash
# GPU call for issue 13 (profile faster): the advisor section set against --set full (passes per
# kernel, wall time, findings) on every demo pair and on PyTorch and Triton programs, the
# wrapper's own cost, and real-run checks (multi-process, -k regex, short form, unknown command,
# Ctrl-C). About 7 minutes (BUDGET seconds for the stages, default 420). Run from the repository
# root on the GPU machine:   bash scripts/gpu_profile_bench.sh
# Needs: ncu on PATH, a GPU, Python 3.12 with cupy/torch/triton/pandas; pydantic (and, if you
# want the .ncu-rep read without CSV exports, ncu-report) as wheels in .whl/.
# Returns under $OUT: profile_bench.json (the summary) and profile_bench.tar.gz (logs, CSV
# exports of both sets, report.json files), re-packed after every stage.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/profile_bench; rm -rf $W; mkdir -p $W/logs
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
. scripts/gpu_lib.sh   # gpu_facts, wheels
wheels
{ gpu_facts
  python3 -c "import torch, triton, cupy; print('torch', torch.__version__, 'triton', triton.__version__, 'cupy', cupy.__version__)" 2>&1
  python3 -c "import ncu_report; print('ncu_report wheel present')" 2>&1 | tail -1
  NCU_DIR=$(dirname "$(readlink -f "$(command -v ncu)")")
  echo "ncu dir: $NCU_DIR"
  grep -rl "CollectionImportance" "$NCU_DIR/extras/FileFormat" 2>/dev/null | head -3
} > $W/logs/host.txt 2>&1
cat $W/logs/host.txt
python3 -m ncu_advisor.profiling.sections --check || echo "WARNING: the shipped section file is out of date"
timeout $(( ${BUDGET:-420} + 120 )) python3 scripts/profile_bench.py --out "$OUT" --work $W --budget "${BUDGET:-420}" "$@"
echo "rc=$?"
ls -la "$OUT"
