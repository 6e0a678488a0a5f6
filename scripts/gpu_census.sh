#!/usr/bin/env bash
# GPU call for issue 24 (profile what matters): a first run on a fresh machine, the wrapper's
# own cost, what `ncu --filter-mode per-launch-config` groups by, and the census of a 10-step
# PyTorch training loop against profiling all its launches. Run from the repository root on the
# GPU machine:  bash scripts/gpu_census.sh [fresh] [probe] [census] [all] [default]
# Packs $OUT/census.tar.xz (captures/ + logs/) after every stage.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/census_work; mkdir -p $W/captures $W/logs
ARCHIVE=census.tar.xz
DEADLINE=${DEADLINE_S:-540}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
. scripts/gpu_lib.sh
wheels
ADVISE="python3 -m ncu_advisor.cli"
LOOP="python3 sample_programs/torch_train_loop.py"
DOCS="$HOME/Documents/NVIDIA Nsight Compute"

fresh() {  # the very first ncu run on this machine is ncu-advise's
  { echo "documents folder before: $(ls -d "$DOCS" 2>&1)"; host_facts; which nsys ncu; } > $W/logs/host.txt 2>&1
  nvcc -O3 -lineinfo -o /tmp/forms_app sample_programs/forms_app.cu > $W/logs/nvcc.log 2>&1
  for i in 1 2 3; do
    log "ncu-advise forms_app run $i"
    $ADVISE -o $W/captures/fresh$i /tmp/forms_app > $W/logs/fresh$i.out 2> $W/logs/fresh$i.err
    echo "rc=$?" >> $W/logs/fresh$i.err
    [ $i = 1 ] && echo "documents folder after: $(ls -d "$DOCS" 2>&1)" >> $W/logs/host.txt
    rm -f $W/captures/fresh$i/*.ncu-rep
  done
  pack captures logs
}

probe() {  # what per-launch-config profiles (one launch per shape?)
  local i=0
  while read -r opts; do
    i=$((i + 1)); log "probe $i: $opts"
    echo "# ncu --metrics gpu__time_duration.sum --csv --page raw $opts" > $W/logs/probe$i.csv
    eval ncu --clock-control none --metrics gpu__time_duration.sum,launch__shared_mem_per_block_dynamic \
      --csv --page raw $opts python3 scripts/probe/filter_mode_probe.py >> $W/logs/probe$i.csv 2>&1
  done <<'OPTS'

--filter-mode per-launch-config -c 1
--filter-mode per-launch-config -c 1 --launch-skip 1
--filter-mode per-launch-config -c 1 -k regex:^kA$
--filter-mode per-launch-config -c 1 --kernel-name-base demangled -k "regex:^(void kT<2>|kB)"
--filter-mode per-launch-config -c 1 --kernel-name-base mangled -k "regex:^(kA|kB)$"
OPTS
  pack captures logs
}

census() {  # the duration alone, every launch of the loop
  log "census of the training loop"
  local t0=$(date +%s.%N)
  ncu --clock-control none --metrics gpu__time_duration.sum,launch__shared_mem_per_block_dynamic \
    --nvtx -o /tmp/census -f $LOOP > $W/logs/census.ncu.log 2>&1
  local t1=$(date +%s.%N)
  ncu --import /tmp/census.ncu-rep --csv --page raw --print-units base > $W/captures/torch_train_loop.census.raw.csv 2>> $W/logs/census.ncu.log
  local t2=$(date +%s.%N)
  python3 -c "print('census ncu %.2f s, export %.2f s' % ($t1 - $t0, $t2 - $t1))" | tee $W/logs/census.time
  t0=$(date +%s.%N); $LOOP > /dev/null; t1=$(date +%s.%N)
  python3 -c "print('loop alone %.2f s' % ($t1 - $t0))" | tee -a $W/logs/census.time
  gzip -n -9 -f $W/captures/torch_train_loop.census.raw.csv
  pack captures logs
}

all_launches() {  # today's default: the advisor set on every launch
  local t=$(( DEADLINE - $(elapsed) )); [ $t -gt 420 ] && t=420
  log "all launches, limit ${t}s"
  local t0=$(date +%s.%N)
  timeout $t $ADVISE -o $W/captures/all -- $LOOP > $W/logs/all.out 2> $W/logs/all.err
  echo "rc=$?" >> $W/logs/all.err
  local t1=$(date +%s.%N)
  python3 -c "print('all launches %.2f s' % ($t1 - $t0))" | tee $W/logs/all.time
  rm -f $W/captures/all/*.ncu-rep; gzip -n -9 -f $W/captures/all/*.csv
  pack captures logs
}

default_run() {  # the new default: census, then one launch per shape
  log "default (census, then depth)"
  local t0=$(date +%s.%N)
  $ADVISE -o $W/captures/default -- $LOOP > $W/logs/default.out 2> $W/logs/default.err
  echo "rc=$?" >> $W/logs/default.err
  local t1=$(date +%s.%N)
  python3 -c "print('default %.2f s' % ($t1 - $t0))" | tee $W/logs/default.time
  rm -f $W/captures/default/*.ncu-rep; gzip -n -9 -f $W/captures/default/*.csv
  pack captures logs
}

for stage in "$@"; do
  case $stage in fresh) fresh ;; probe) probe ;; census) census ;; all) all_launches ;;
    default) default_run ;; esac
done
pack captures logs
log finished
