#!/usr/bin/env bash
# Third GPU call of 2026-11-29: `ncu-advise ./app` end to end on a CUDA program and on a PyTorch
# script, and the lab's `ncu-advise demo coalescing --profile`. Packs $OUT/examples.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/ex; rm -rf $W; mkdir -p $W/bin
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
REPO=$PWD
ARCHIVE=examples.tar.xz
. scripts/gpu_lib.sh   # log, pack, wheels
wheels
nvcc -arch=sm_90 -lineinfo -O3 -o $W/bin/forms_app sample_programs/forms_app.cu
cd $W
log forms_app
timeout 90 python3 -m ncu_advisor.cli profile -o forms_app ./bin/forms_app > forms_app.out.txt 2>&1; echo "rc=$?" >> forms_app.out.txt
log torch
timeout 120 python3 -m ncu_advisor.cli profile -c 12 --nvtx -o torch_mlp python3 $REPO/sample_programs/torch_mlp.py > torch_mlp.out.txt 2>&1; echo "rc=$?" >> torch_mlp.out.txt
log demo
(cd $REPO && timeout 60 python3 -m ncu_advisor.cli demo coalescing --profile) > demo.out.txt 2>&1; echo "rc=$?" >> demo.out.txt
rm -f */*.ncu-rep
pack forms_app torch_mlp *.out.txt; tail -3 *.out.txt; log done
