#!/usr/bin/env bash
# Foreign code and demos with source (issues 9, 11, 12; GPU call of 2026-12-01, once
# gpu_session3.sh): captures of code this project did not write
# (PyTorch ops under nested NVTX, Triton, CuPy built-ins), a TF32 before/after with a repeat run,
# every demo pair with its CUDA source imported (for source lines), per-variant exports, a live
# plain-text run, and the source and session pages. Every report is exported in the forms users
# have: details CSV (import default units), raw CSV, plain text. Packs $OUT/caps.tar.xz after
# every stage (a cut-off run still returns data) and the small .ncu-rep files in $OUT/reps.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/s3; rm -rf $W; mkdir -p $W/foreign $W/demos $W/forms $W/logs $W/bin /tmp/reps
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
REPO=$PWD
ARCHIVE=caps.tar.xz; DIRS="foreign demos forms logs"
. scripts/gpu_lib.sh   # log, left (T0 set here), gpu_facts, pack, wheels
wheels
{ gpu_facts
  python3 -c "import torch, triton, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'cupy', cupy.__version__)"; } > $W/logs/host.txt 2>&1
cat $W/logs/host.txt
C="--clock-control none"
# export DIR NAME: the forms users have, all from one .ncu-rep
export_forms() {
  ncu --import /tmp/reps/$2.ncu-rep --csv > $W/$1/$2.details.csv 2>> $W/logs/$2.import.log
  ncu --import /tmp/reps/$2.ncu-rep --csv --page raw > $W/$1/$2.raw.csv 2>> $W/logs/$2.import.log
  ncu --import /tmp/reps/$2.ncu-rep > $W/$1/$2.txt 2>> $W/logs/$2.import.log
}
# profile DIR NAME TIMEOUT ncu-args... -- program...
profile() {
  local dir=$1 name=$2 to=$3; shift 3
  log "profile $name"
  timeout $to ncu --set full $C -f -o /tmp/reps/$name "$@" > $W/logs/$name.ncu.log 2>&1
  echo "rc=$?" >> $W/logs/$name.ncu.log
  export_forms $dir $name; pack $DIRS
}
profile foreign torch_ops 240 --nvtx --profile-from-start off python3 sample_programs/torch_ops.py
ncu --import /tmp/reps/torch_ops.ncu-rep --csv --print-nvtx-rename kernel > $W/foreign/torch_ops.nvtx-rename.details.csv 2>/dev/null
ncu --import /tmp/reps/torch_ops.ncu-rep --csv --page session > $W/foreign/torch_ops.session.csv 2>&1
profile foreign triton_kernels 120 --profile-from-start off python3 sample_programs/triton_kernels.py
profile foreign cupy_builtins 120 --profile-from-start off python3 sample_programs/cupy_builtins.py
profile foreign torch_tf32_off 90 --nvtx --profile-from-start off python3 sample_programs/torch_tf32.py
profile foreign torch_tf32_off_repeat 90 --nvtx --profile-from-start off python3 sample_programs/torch_tf32.py
profile foreign torch_tf32_on 90 --nvtx --profile-from-start off python3 sample_programs/torch_tf32.py --tf32
# Demos: -lineinfo is in the CuPy build options; --import-source keeps the CUDA text in the report.
python3 - > /tmp/demo_kernels.txt <<'PY'
import glob, tomllib
for p in sorted(glob.glob("kernels/*/demo.toml")):
    d = tomllib.load(open(p, "rb"))
    print(d["name"], "|".join(d["bad"]["kernels"]), "|".join(d["good"]["kernels"]))
PY
while read -r name bad good; do
  left 470 || { log "skip demo $name (time)"; continue; }
  profile demos $name 60 --import-source yes --profile-from-start off python3 -m ncu_advisor.demos once $name
  ncu --import /tmp/reps/$name.ncu-rep --csv --page raw -k "regex:^($bad)\$" > $W/demos/$name.bad.raw.csv 2>/dev/null
  ncu --import /tmp/reps/$name.ncu-rep --csv --page raw -k "regex:^($good)\$" > $W/demos/$name.good.raw.csv 2>/dev/null
done < /tmp/demo_kernels.txt
for name in coalescing bank-conflicts local-memory divergence; do
  [ -f /tmp/reps/$name.ncu-rep ] || continue
  ncu --import /tmp/reps/$name.ncu-rep --csv --page source --print-source cuda,sass > $W/demos/$name.source.csv 2> $W/logs/$name.source.log
  ncu --import /tmp/reps/$name.ncu-rep --page source --print-source cuda,sass > $W/demos/$name.source.txt 2>> $W/logs/$name.source.log
done
pack $DIRS
if left 520; then
  log "live text run"; nvcc -arch=sm_90 -lineinfo -O3 -o $W/bin/forms_app sample_programs/forms_app.cu
  (cd $W/bin && timeout 60 ncu --set full $C ./forms_app > $W/forms/forms_app.live.full.txt 2>&1)
fi
ls -la /tmp/reps > $W/logs/reps.ls
pack $DIRS
# The .ncu-rep files worth keeping, in two archives under the 16 MB a returned file may have
# (the PyTorch one runs to tens of MB and stays behind; its CSV and text exports come back).
(cd /tmp/reps && tar cJf $OUT/reps_a.tar.xz $(ls coalescing.ncu-rep bank-conflicts.ncu-rep local-memory.ncu-rep divergence.ncu-rep triton_kernels.ncu-rep cupy_builtins.ncu-rep 2>/dev/null))
(cd /tmp/reps && tar cJf $OUT/reps_b.tar.xz $(find . -name 'torch_tf32*.ncu-rep' -size -12M -printf '%f\n' | sort))
ls -la $OUT; log done
