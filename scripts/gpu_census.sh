#!/usr/bin/env bash
# GPU call for issue 24 (profile what matters): a first run on a fresh machine, the wrapper's
# own cost, what `ncu --filter-mode per-launch-config` groups by, and the census of a 10-step
# PyTorch training loop against profiling all its launches. Run from the repository root on the
# GPU machine:  bash scripts/gpu_census.sh [fresh] [probe] [census] [all] [default]
# PROGRAM (default sample_programs/torch_train_loop.py) is the loop the last three stages run;
# their files are named after it. Packs $OUT/census.tar.xz (captures/ + logs/) after every stage.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/census_work; mkdir -p $W/captures $W/logs
ARCHIVE=census.tar.xz
DEADLINE=${DEADLINE_S:-540}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
. scripts/gpu_lib.sh
wheels
ADVISE="python3 -m ncu_advisor.cli"
PROGRAM=${PROGRAM:-sample_programs/torch_train_loop.py}
LOOP="python3 $PROGRAM"
STEM=$(basename "$PROGRAM" .py)
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
  log "census of $STEM"
  local t0=$(date +%s.%N)
  ncu --clock-control none --metrics gpu__time_duration.sum,launch__shared_mem_per_block_dynamic \
    --nvtx -o /tmp/census -f $LOOP > $W/logs/$STEM.census.ncu.log 2>&1
  local t1=$(date +%s.%N)
  ncu --import /tmp/census.ncu-rep --csv --page raw --print-units base > $W/captures/$STEM.census.raw.csv 2>> $W/logs/$STEM.census.ncu.log
  local t2=$(date +%s.%N)
  python3 -c "print('census ncu %.2f s, export %.2f s' % ($t1 - $t0, $t2 - $t1))" | tee $W/logs/$STEM.census.time
  echo "launches $(( $(wc -l < $W/captures/$STEM.census.raw.csv) - 2 ))" | tee -a $W/logs/$STEM.census.time
  t0=$(date +%s.%N); $LOOP > /dev/null; t1=$(date +%s.%N)
  python3 -c "print('loop alone %.2f s' % ($t1 - $t0))" | tee -a $W/logs/$STEM.census.time
  gzip -n -9 -f $W/captures/$STEM.census.raw.csv
  pack captures logs
}

all_launches() {  # today's default: the advisor set on every launch
  local t=$(( DEADLINE - $(elapsed) )); [ $t -gt ${ALL_LIMIT_S:-420} ] && t=${ALL_LIMIT_S:-420}
  # ~0.6 s a launch under the advisor set: skip a run that cannot finish (census stage first)
  local n=$(awk '/^launches/ {print $2}' $W/logs/$STEM.census.time 2>/dev/null)
  if [ -n "$n" ] && [ $(( 15 + n * 6 / 10 )) -gt $t ]; then
    log "skip all launches of $STEM: $n launches need ~$(( 15 + n * 6 / 10 ))s, ${t}s left"; return
  fi
  log "all launches of $STEM, limit ${t}s"
  # ALL_NCU: ncu options for a part of the launches (-c N, --launch-skip N) when every
  # launch does not fit one call; ALL_TAG names that part.
  local t0=$(date +%s.%N) d=$W/captures/$STEM.all${ALL_TAG:-}
  timeout $t $ADVISE --all-launches -o $d -- $LOOP ${ALL_NCU:+-- $ALL_NCU} > $d.out 2> $d.err
  echo "rc=$?" >> $d.err
  local t1=$(date +%s.%N)
  python3 -c "print('all launches${ALL_TAG:-} ${ALL_NCU:-} %.2f s' % ($t1 - $t0))" | tee -a $W/logs/$STEM.wall_times.txt
  rm -f $d/*.ncu-rep; gzip -n -9 -f $d/*.csv
  pack captures logs
}

default_run() {  # the new default: census, then one launch per shape
  local n=1; while [ -e $W/captures/$STEM.default${RUN_TAG:-}$n ]; do n=$((n + 1)); done
  log "default run ${RUN_TAG:-}$n of $STEM (census, then depth)"
  local t0=$(date +%s.%N) d=$W/captures/$STEM.default${RUN_TAG:-}$n
  $ADVISE -o $d -- $LOOP > $d.out 2> $d.err
  echo "rc=$?" >> $d.err
  local t1=$(date +%s.%N)
  python3 -c "print('default ${RUN_TAG:-}$n %.2f s' % ($t1 - $t0))" | tee -a $W/logs/$STEM.wall_times.txt
  rm -f $d/*.ncu-rep; gzip -n -9 -f $d/*.csv
  pack captures logs
}

for stage in "$@"; do
  case $stage in fresh) fresh ;; probe) probe ;; census) census ;; all) all_launches ;;
    default) default_run ;; esac
done
pack captures logs
log finished
