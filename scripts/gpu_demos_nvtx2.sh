#!/usr/bin/env bash
# Every demo pair again, now with one NVTX range per variant (demos once pushes
# DEMO/ROLE:FUNCTION, ncu --nvtx records it), plus the probe of live CSV pages from the
# profiling run itself (scripts/probe/live_pages_probe.py). Packs $OUT/d5.tar.xz after every
# step so a cut-off run still returns data.
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/d5; rm -rf $W; mkdir -p $W/demos $W/logs $W/probe
ARCHIVE=d5.tar.xz; DIRS="demos logs probe"
. scripts/gpu_lib.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
wheels
host_facts > $W/logs/host.txt 2>&1
C="--clock-control none"
for n in $(python3 -m ncu_advisor.demos list | awk '/^[^ \t]/ {print $1}'); do
  log "profile $n"
  timeout 120 ncu --set full $C --nvtx --profile-from-start off -f -o /tmp/$n \
      python3 -m ncu_advisor.demos once $n > $W/logs/$n.ncu.log 2>&1
  ncu --import /tmp/$n.ncu-rep --csv --print-units base > $W/demos/$n.details.csv
  ncu --import /tmp/$n.ncu-rep --csv --page raw --print-units base > $W/demos/$n.raw.csv
done
pack $DIRS
log "live pages probe"
timeout 240 python3 scripts/probe/live_pages_probe.py $W/probe > $W/logs/probe.txt 2>&1
tail -40 $W/logs/probe.txt
pack $DIRS
log "gpu tests"; timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -8 > $W/logs/pytest_gpu.txt; cat $W/logs/pytest_gpu.txt
pack $DIRS; log done
