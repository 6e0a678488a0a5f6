#!/usr/bin/env bash
# Every demo pair (ncu --set full, details + raw CSV), the GPU tests, the profile-mode examples,
# the fixed occupancy sweep and the NVTX rename exports (the second GPU call of 2026-11-29, once
# gpu_session2.sh). Packs $OUT/s2.tar.xz after every step so a cut-off run still returns data.
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/s2; rm -rf $W; mkdir -p $W/demos $W/examples $W/occupancy $W/forms $W/logs $W/bin
ARCHIVE=s2.tar.xz; DIRS="demos examples occupancy forms logs"
. scripts/gpu_lib.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
REPO=$PWD
wheels
gpu_facts > $W/logs/host.txt
C="--clock-control none"
for n in $(python3 -m ncu_advisor.demos list | awk '{print $1}'); do
  log "profile $n"
  timeout 120 ncu --set full $C --profile-from-start off -f -o /tmp/$n \
      python3 -m ncu_advisor.demos once $n > $W/logs/$n.ncu.log 2>&1
  ncu --import /tmp/$n.ncu-rep --csv --print-units base > $W/demos/$n.details.csv
  ncu --import /tmp/$n.ncu-rep --csv --page raw --print-units base > $W/demos/$n.raw.csv
done
pack $DIRS
log "gpu tests"; timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -8 > $W/logs/pytest_gpu.txt; cat $W/logs/pytest_gpu.txt
pack $DIRS
nvcc -arch=sm_90 -lineinfo -O3 -o $W/bin/forms_app sample_programs/forms_app.cu
nvcc -arch=sm_90 -lineinfo -O3 -o $W/bin/occ_sweep sample_programs/occ_sweep.cu
log "example: forms_app"
(cd $W/examples && timeout 120 python3 -m ncu_advisor.cli $W/bin/forms_app -o forms_app > forms_app.stdout.txt 2> forms_app.stderr.txt; echo "rc=$?" >> forms_app.stderr.txt)
log "example: torch"
(cd $W/examples && timeout 150 python3 -m ncu_advisor.cli profile -c 12 --nvtx -o torch_mlp python3 $REPO/sample_programs/torch_mlp.py > torch_mlp.stdout.txt 2> torch_mlp.stderr.txt; echo "rc=$?" >> torch_mlp.stderr.txt)
rm -f $W/examples/*/*.ncu-rep.keep
pack $DIRS
log "occupancy sweep"
ncu --section LaunchStats --section Occupancy $C -f -o /tmp/occ ./$W/bin/occ_sweep > $W/logs/occ.stdout 2>&1 || ncu --section LaunchStats --section Occupancy $C -f -o /tmp/occ $W/bin/occ_sweep > $W/logs/occ.stdout 2>&1
ncu --import /tmp/occ.ncu-rep --csv --page raw --print-units base > $W/occupancy/occ_sweep2.import.raw.base.csv
cp /tmp/occ.ncu-rep $W/occupancy/occ_sweep2.ncu-rep
log "nvtx rename"
ncu --set basic --nvtx $C -f -o /tmp/fnv $W/bin/forms_app > /dev/null 2>&1
ncu --import /tmp/fnv.ncu-rep --csv > $W/forms/forms_app.import.basic.nvtx.csv
ncu --import /tmp/fnv.ncu-rep --csv --print-nvtx-rename kernel > $W/forms/forms_app.import.basic.nvtx-rename.csv
ncu --set basic --nvtx $C -c 12 -f -o /tmp/tnv python3 $REPO/sample_programs/torch_mlp.py > /dev/null 2>&1
ncu --import /tmp/tnv.ncu-rep --csv --print-nvtx-rename kernel > $W/forms/torch_mlp.import.basic.nvtx-rename.csv
ncu --import /tmp/tnv.ncu-rep --csv > $W/forms/torch_mlp.import.basic.nvtx.csv
pack $DIRS; ls -la $W/*; log done
