#!/usr/bin/env bash
# Captures every ncu export form of the small sample programs (issue 2) and the
# occupancy sweep (issue 5). Runs on the GPU machine from the repo root; packs
# everything under $OUT. See sample_reports/PROVENANCE.md for how it was used.
set -u
NCU=${NCU:-ncu}
OUT=${OUT:-/tmp/out}
W=/tmp/forms; rm -rf $W; mkdir -p $W/bin $W/cap
ARCHIVE=forms.tar.xz
cd "$(dirname "$0")/.."
. scripts/gpu_lib.sh   # log, pack
# host.txt opens with the stamp of the committed one (clock time only, not log's elapsed).
{
  echo "[$(date +%T)] host facts"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  $NCU --version; nvcc --version | tail -2; python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)"
  $NCU --list-sets > $W/cap/ncu_list_sets.txt 2>&1
  $NCU --list-sections > $W/cap/ncu_list_sections.txt 2>&1
  mkdir -p $W/cap/sections && cp /opt/nvidia/nsight-compute/2025.3.1/sections/*.section $W/cap/sections/ 2>/dev/null
} > $W/cap/host.txt 2>&1
cat $W/cap/host.txt
for p in forms_app occ_sweep; do
  nvcc -arch=sm_90 -lineinfo -O3 -o $W/bin/$p sample_programs/$p.cu || exit 1
done
C="--clock-control none"
cd $W/cap
log live full csv;     $NCU --set full --csv $C ../bin/forms_app > forms_app.live.full.csv 2> live.stderr
log live basic csv;    $NCU --set basic --csv $C ../bin/forms_app > forms_app.live.basic.csv 2>> live.stderr
log live detailed;     $NCU --set detailed --csv $C ../bin/forms_app > forms_app.live.detailed.csv 2>> live.stderr
log live roofline;     $NCU --set roofline --csv $C ../bin/forms_app > forms_app.live.roofline.csv 2>> live.stderr
log live metrics;      $NCU --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread --csv $C ../bin/forms_app > forms_app.live.metrics.csv 2>> live.stderr
log live nvtx;         $NCU --set full --nvtx --csv $C ../bin/forms_app > forms_app.live.nvtx.csv 2>> live.stderr
log live fail;         $NCU --set basic --csv $C ../bin/forms_app --fail > forms_app.live.fail.csv 2>> live.stderr; echo "exit=$?" >> live.stderr
log rep full;          $NCU --set full $C -o forms_app ../bin/forms_app > rep.stdout 2>&1
log rep full nvtx;     $NCU --set full --nvtx $C -o forms_app_nvtx ../bin/forms_app >> rep.stdout 2>&1
R=forms_app.ncu-rep
log imports
$NCU --import $R --csv > forms_app.import.details.csv
$NCU --import $R --csv --print-units base > forms_app.import.details.base.csv
$NCU --import $R --csv --print-metric-name label-name > forms_app.import.details.label-name.csv
$NCU --import $R --csv --print-metric-name label-name --print-units base > forms_app.import.details.label-name.base.csv
$NCU --import $R --csv --print-metric-name name > forms_app.import.details.name.csv
$NCU --import $R --csv --print-details all > forms_app.import.details.all.csv
$NCU --import $R --csv --print-details all --print-metric-name label-name > forms_app.import.details.all.label-name.csv
$NCU --import $R --csv --print-fp --print-units base > forms_app.import.details.fp.csv
$NCU --import $R --csv --page raw > forms_app.import.raw.csv
$NCU --import $R --csv --page raw --print-units base > forms_app.import.raw.base.csv
$NCU --import $R --csv --print-summary per-kernel > forms_app.import.summary.csv
$NCU --import forms_app_nvtx.ncu-rep --csv --nvtx > forms_app.import.nvtx.csv
$NCU --import forms_app_nvtx.ncu-rep --csv --nvtx --print-nvtx-rename kernel > forms_app.import.nvtx-rename.csv
$NCU --import forms_app_nvtx.ncu-rep --csv --page raw --nvtx > forms_app.import.raw.nvtx.csv
log torch nvtx
$NCU --set full --nvtx --csv $C -c 12 python3 "$OLDPWD/sample_programs/torch_mlp.py" > torch_mlp.live.nvtx.csv 2> torch.stderr
$NCU --set full --nvtx $C -c 12 -o torch_mlp python3 "$OLDPWD/sample_programs/torch_mlp.py" >> torch.stderr 2>&1
$NCU --import torch_mlp.ncu-rep --csv --nvtx --print-nvtx-rename kernel > torch_mlp.import.nvtx-rename.csv
log occupancy sweep
$NCU --section LaunchStats --section Occupancy $C -o occ_sweep ../bin/occ_sweep > occ.stdout 2>&1
$NCU --import occ_sweep.ncu-rep --csv --page raw --print-units base > occ_sweep.import.raw.base.csv
$NCU --import occ_sweep.ncu-rep --csv --print-units base > occ_sweep.import.details.base.csv
log rep reader check
python3 - <<'PY' > ncu_report_check.txt 2>&1
import sys
sys.path.insert(0, "/opt/nvidia/nsight-compute/2025.3.1/extras/python")
import ncu_report
ctx = ncu_report.load_report("forms_app.ncu-rep")
r = ctx.range_by_idx(0)
print("actions", r.num_actions())
a = r.action_by_idx(0)
print(a.name(), len(a.metric_names()))
PY
ls -la
pack cap && ls -la $OUT && log done
