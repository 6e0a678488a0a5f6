#!/usr/bin/env bash
# Third GPU call of 2026-11-29: `ncu-advise ./app` end to end on a CUDA program and on a PyTorch
# script, and the lab's `ncu-advise demo coalescing --profile`. Packs $OUT/examples.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/ex; rm -rf $W; mkdir -p $W/bin
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
REPO=$PWD
if ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
nvcc -arch=sm_90 -lineinfo -O3 -o $W/bin/forms_app sample_programs/forms_app.cu
cd $W
echo "[$(date +%T)] forms_app"
timeout 90 python3 -m ncu_advisor.cli profile -o forms_app ./bin/forms_app > forms_app.out.txt 2>&1; echo "rc=$?" >> forms_app.out.txt
echo "[$(date +%T)] torch"
timeout 120 python3 -m ncu_advisor.cli profile -c 12 --nvtx -o torch_mlp python3 $REPO/sample_programs/torch_mlp.py > torch_mlp.out.txt 2>&1; echo "rc=$?" >> torch_mlp.out.txt
echo "[$(date +%T)] demo"
(cd $REPO && timeout 60 python3 -m ncu_advisor.cli demo coalescing --profile) > demo.out.txt 2>&1; echo "rc=$?" >> demo.out.txt
rm -f */*.ncu-rep
tar cJf $OUT/examples.tar.xz forms_app torch_mlp *.out.txt; tail -3 *.out.txt; echo "[$(date +%T)] done"
