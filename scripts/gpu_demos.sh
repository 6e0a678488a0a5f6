#!/usr/bin/env bash
# One GPU call for issue 3/4: GPU tests, timing of every demo pair, and an `ncu --set full`
# capture of every pair (imported as details + raw CSV). Run from the repo root on the device:
#   bash scripts/gpu_demos.sh [demo ...]     (default: all demos)
# Everything lands in $OUT/demos.tar.xz (+ reps in $OUT/reps.tar.xz.part-*).
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/demos; rm -rf $W; mkdir -p $W/cap $W/reps
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
ARCHIVE=demos.tar.xz
. scripts/gpu_lib.sh   # log, pack, wheels
[ -d .whl ] && wheels
NAMES=${*:-$(python3 -m ncu_advisor.demos list | awk '{print $1}')}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  ncu --version | tail -1; python3 -c "import cupy; print('cupy', cupy.__version__)"
  date -u
} > $W/cap/host.txt 2>&1
cat $W/cap/host.txt
log "gpu tests"
python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_demos.py 2>&1 | tail -15 | tee $W/cap/pytest_gpu.txt
log "timing"
python3 -m ncu_advisor.demos time ${1:-all} --json $W/cap/timing.json 2>&1 | tee $W/cap/timing.txt
[ $# -gt 1 ] && for n in "${@:2}"; do python3 -m ncu_advisor.demos time $n --json $W/cap/timing_$n.json; done
for n in $NAMES; do
  log "profile $n"
  ncu --set full --clock-control none --profile-from-start off -f -o $W/reps/$n \
      python3 -m ncu_advisor.demos once $n > $W/cap/$n.ncu.log 2>&1 || { echo "ncu failed for $n"; tail -5 $W/cap/$n.ncu.log; }
  if [ -f $W/reps/$n.ncu-rep ]; then
    ncu --import $W/reps/$n.ncu-rep --csv --print-units base > $W/cap/$n.details.csv
    ncu --import $W/reps/$n.ncu-rep --csv --page raw --print-units base > $W/cap/$n.raw.csv
  fi
done
ls -la $W/reps
log "pack"
pack cap
(cd $W && tar cJf - reps | split -b 15M - $OUT/reps.tar.xz.part-)
ls -la $OUT; log done
