#!/usr/bin/env bash
# GPU call for the blind evaluation corpus (sample_programs/corpus/, captures.tsv lists every
# capture). Usage on the device machine, from the repo root:
#   bash scripts/gpu_corpus.sh capture NAME...   # ncu --set full, exported in every form
#   bash scripts/gpu_corpus.sh time NAME...      # the step timed without ncu (30 steps)
#   bash scripts/gpu_corpus.sh live NAME...      # a separate live `ncu --csv` run
# Modes can follow each other in one call: `capture a b time c d`. Work stops being started
# once DEADLINE_S seconds (default 540) have passed; the archive $OUT/corpus.tar.xz is packed
# after every capture, so a cut-off call still brings back what was done.
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/corpus_work; R=/tmp/reps; P=sample_programs/corpus
ARCHIVE=corpus.tar.xz
DEADLINE=${DEADLINE_S:-540}
KEEP_REP_BYTES=${KEEP_REP_BYTES:-3500000}   # .ncu-rep files kept when at most this size
CAPTURE_S=${CAPTURE_S:-240}                  # the most one capture may take
mkdir -p $W/corpus $W/logs $R
. scripts/gpu_lib.sh
export PYTHONUNBUFFERED=1
[ -s $W/logs/host.txt ] || host_facts > $W/logs/host.txt 2>&1
# NCU_EXTRA: more ncu options for the captures of this call (e.g. `-c 70`: the first 70 launches)
NCU="ncu --set full --clock-control none --nvtx --profile-from-start off -f ${NCU_EXTRA:-}"

command_of() { awk -F'\t' -v n="$1" '$1 == n {print $3}' $P/captures.tsv; }
budget() {  # seconds a step may take: what is left before the deadline, at most $1
  local left=$(( DEADLINE - $(elapsed) )); [ $left -gt $1 ] && left=$1; echo $left
}

capture() {
  local name=$1 cmd t; cmd=$(command_of "$name"); t=$(budget $CAPTURE_S)
  [ -n "$cmd" ] || { log "unknown capture $name"; return; }
  [ "$t" -ge 45 ] || { log "skip $name: too little time left"; echo "$name" >> $W/logs/skipped.txt; return; }
  log "capture $name ($cmd), limit ${t}s"
  # -o and --page details together: the report file and the live CSV in one run.
  timeout $t $NCU -o $R/$name --csv --page details python3 $P/$cmd \
    > $W/corpus/$name.live.csv 2> $W/logs/$name.ncu.log
  echo "rc=$?" >> $W/logs/$name.ncu.log
  # stdout is kept as it is even when cut short: the reader decides what it holds
  grep -q '^"ID",' $W/corpus/$name.live.csv || log "$name: no CSV header on stdout (cut short?)"
  [ -f $R/$name.ncu-rep ] || { log "no report for $name"; return; }
  ncu --import $R/$name.ncu-rep --csv > $W/corpus/$name.details.csv 2>> $W/logs/$name.import.log
  ncu --import $R/$name.ncu-rep --csv --page raw > $W/corpus/$name.raw.csv 2>> $W/logs/$name.import.log
  ncu --import $R/$name.ncu-rep > $W/corpus/$name.txt 2>> $W/logs/$name.import.log
  ls -l $R/$name.ncu-rep >> $W/logs/rep-sizes.txt
  [ $(stat -c %s $R/$name.ncu-rep) -le $KEEP_REP_BYTES ] && cp $R/$name.ncu-rep $W/corpus/
  echo "$name launches $(( $(wc -l < $W/corpus/$name.raw.csv) - 2 ))" | tee -a $W/logs/launches.txt
  gzip -n -9 -f $W/corpus/$name.*.csv $W/corpus/$name.txt
  log "done $name"
  pack corpus logs
}

live() {
  local name=$1 cmd t; cmd=$(command_of "$name"); t=$(budget 200)
  [ "$t" -ge 45 ] || { log "skip live $name"; return; }
  log "live $name"
  timeout $t ncu --set full --clock-control none --nvtx --profile-from-start off --csv \
    python3 $P/$cmd > $W/corpus/$name.live.csv 2> $W/logs/$name.live.log
  gzip -n -9 -f $W/corpus/$name.live.csv
  pack corpus logs
}

timed() {
  local name=$1 cmd t; cmd=$(command_of "$name"); t=$(budget 150)
  [ "$t" -ge 20 ] || { log "skip time $name"; return; }
  log "time $name"
  timeout $t python3 $P/$cmd --time 30 >> $W/corpus/timings.jsonl 2>> $W/logs/time.$name.log
  echo "rc=$?" >> $W/logs/time.$name.log
  pack corpus logs
}

mode=capture
for arg in "$@"; do
  case $arg in
    capture|time|live) mode=$arg ;;
    *) case $mode in capture) capture "$arg" ;; time) timed "$arg" ;; live) live "$arg" ;; esac ;;
  esac
done
pack corpus logs
log "finished"; ls -la $W/corpus | tail -n +2 | wc -l
