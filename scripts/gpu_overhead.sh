#!/usr/bin/env bash
# GPU call for issue 24's fixed-cost target: the wrapper's own steps after ncu (export, read,
# analyze, render) against ncu's own time, and two probes that decide what to build next.
# Run from the repository root on the GPU machine, in one device call (under 8 minutes):
#   bash scripts/gpu_overhead.sh
# Stages (each skipped when too little of DEADLINE_S, default 400 s, is left; each followed by a
# summary and a pack, so a cut-off call still returns what was done):
#   1. forms_app (sample_programs/forms_app.cu, 9 kernels): one default run (census, then depth;
#      the first run, so it also warms caches), then REPEATS (3) rounds of: the exact ncu command
#      `ncu-advise --all-launches` runs ("bare"), `ncu-advise --all-launches`, and the same with
#      --no-html, the order rotating each round;
#   2. exports of forms_app's .ncu-rep: ncu's process floor (--version), the raw and details
#      pages alone and side by side (what the wrapper does), both pages in one ncu call (if ncu
#      takes two --page), --apply-rules no, and reading the .ncu-rep through ncu_report instead;
#   3. ncu --filter-mode per-launch-config with --kernel-name-base mangled / demangled on
#      scripts/probe/filter_mode_probe.py: are two template instantiations with one launch
#      configuration (kT<1>, kT<2>) still collapsed into one? (No: the census's second depth
#      run can go.)
#   4. two dev corpus programs (CORPUS, default cuda_reduction cuda_memory_access; never the
#      sealed ones): a default run, then REPEATS rounds of bare ncu / ncu-advise --all-launches;
#   5. benchmarks/bench_wrapper.py on this machine's CPU (the fake ncu: no GPU needed).
# Returns under $OUT: overhead_summary.txt (read this first: what was measured, medians,
# verdicts against the targets), overhead.json (the same as data), overhead.tar.xz (every log,
# report.json of every run, the export and filter probe outputs).
# Needs: ncu on PATH, a GPU, nvcc (or FORMS_APP=path of a built forms_app), CuPy for the probe
# and the corpus programs. Dry run without a GPU: PATH=<folder with tests/fake_ncu/ncu as ncu>
# FORMS_APP=/bin/true CORPUS= bash scripts/gpu_overhead.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=${WORK:-/tmp/overhead_work}; rm -rf "$W"; mkdir -p $W/logs $W/runs $W/exports $W/filter
ARCHIVE=overhead.tar.xz
DEADLINE=${DEADLINE_S:-400}
REPEATS=${REPEATS:-3}
CORPUS=${CORPUS-cuda_reduction cuda_memory_access}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
. scripts/gpu_lib.sh   # elapsed, log, left, gpu_facts, host_facts, wheels
wheels
ADVISE="python3 -m ncu_advisor.cli"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
limit() {  # seconds one command may take: what is left before the deadline, at most $1
  local t=$(( DEADLINE - $(elapsed) )); [ $t -gt $1 ] && t=$1; echo $t
}
finish_stage() {  # summary and archive after every stage
  python3 scripts/overhead_summary.py $W "$OUT" > $W/logs/summary.stdout 2>&1 \
    || log "summary failed: $(tail -1 $W/logs/summary.stdout)"
  (cd "$W" && tar cJf "$OUT/$ARCHIVE" --exclude='*.ncu-rep' --exclude='exports/*.csv' --exclude='runs/*.csv' \
    --exclude='report.html' logs runs exports filter runs.tsv exports.tsv 2>/dev/null)
  log "stage $1 done"
}

timed() {  # timed PROGRAM MODE REP DIR COMMAND...: run it, add a line to runs.tsv
  local program=$1 mode=$2 rep=$3 dir=$4; shift 4
  local t; t=$(limit 150)
  if [ "$t" -lt 25 ]; then log "skip $program $mode $rep: too little time left"; return 1; fi
  local base=$W/logs/$program.$mode.$rep t0; t0=$(now)
  timeout "$t" "$@" > $base.out 2> $base.err
  local rc=$?
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$program" "$mode" "$rep" "$(since $t0)" "$rc" "$dir" \
    >> $W/runs.tsv
  log "$program $mode $rep: exit $rc, $(tail -1 $W/runs.tsv | cut -f4) s"
  [ -n "$dir" ] && rm -f "$dir"/*.ncu-rep  # keep the disk free; the bare run's report stays
  return 0
}

bare_command() {  # bare_command REP LOG NCU_OPTS PROGRAM ARGS...: the wrapper's exact ncu command
  python3 - "$@" <<'EOF'
import shlex, sys
from ncu_advisor.profiling.command import build_ncu_command, resolve_program
from ncu_advisor.profiling.install import find_ncu
rep, log_file, ncu_opts, program, *args = sys.argv[1:]
# What run_profile builds for --all-launches: the advisor set, --clock-control none,
# --target-processes all, the user's ncu options, --log-file, -o REP -f, the program.
print(shlex.join(build_ncu_command(find_ncu(), resolve_program(program), args, rep_path=rep,
                                   extra=shlex.split(ncu_opts), log_file=log_file)))
EOF
}

pairs() {  # pairs NAME "MODES" "NCU_OPTS" PROGRAM ARGS...
  local name=$1 modes=$2 ncu_opts=$3; shift 3
  local tail_opts=(); [ -n "$ncu_opts" ] && tail_opts=(-- $ncu_opts)
  timed $name default 0 $W/runs/$name.default.0 \
    $ADVISE -o $W/runs/$name.default.0 -- "$@" "${tail_opts[@]}" || return
  local bare; bare=$(bare_command $W/runs/$name.bare.ncu-rep $W/logs/$name.bare.ncu.log \
    "$ncu_opts" "$@") || { log "cannot build the bare command of $name"; return; }
  echo "$bare" > $W/logs/$name.bare.command.txt
  local list=($modes) n rep k mode dir
  n=${#list[@]}
  for rep in $(seq 1 $REPEATS); do
    for k in $(seq 0 $((n - 1))); do
      mode=${list[$(( (k + rep - 1) % n ))]}
      dir=$W/runs/$name.$mode.$rep
      case $mode in
        bare) timed $name bare $rep "" bash -c "$bare" || return ;;
        wrapper) timed $name wrapper $rep $dir \
          $ADVISE -o $dir --all-launches -- "$@" "${tail_opts[@]}" || return ;;
        wrapper-nohtml) timed $name wrapper-nohtml $rep $dir \
          $ADVISE -o $dir --all-launches --no-html -- "$@" "${tail_opts[@]}" || return ;;
      esac
    done
  done
}

probe_export() {  # probe_export NAME REP COMMAND...: one export's time, size, headers, rule rows
  local name=$1 rep=$2; shift 2
  local f=$W/exports/$name.$rep.csv t0 rc wall; t0=$(now)
  timeout 60 "$@" > $f 2> $W/exports/$name.$rep.err; rc=$?
  wall=$(since $t0)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rep" "$wall" "$rc" "$(stat -c %s $f)" \
    "$(grep -c '^"ID",' $f)" "$(grep -cE '"(OPT|INF|WRN|ERR)","' $f)" >> $W/exports.tsv
  head -c 300 $f > $W/exports/$name.$rep.head.txt  # what ncu said, when it refused
}

exports() {
  local rep=$W/runs/forms_app.bare.ncu-rep
  [ -s $rep ] || { log "no bare forms_app report to export"; return; }
  left $((DEADLINE - 40)) || { log "skip exports: too little time left"; return; }
  local raw="ncu --import $rep --csv --page raw --print-units base"
  local det="ncu --import $rep --csv --print-units base"
  for i in 1 2 3; do
    probe_export ncu-version $i ncu --version
    probe_export import-raw $i $raw
    probe_export import-details $i $det
    probe_export both-parallel $i bash -c "$raw > $W/exports/p.raw & $det > $W/exports/p.det; wait; cat $W/exports/p.raw $W/exports/p.det"
  done
  for i in 1 2; do
    probe_export one-call-page-raw-page-details $i $raw --page details
    probe_export one-call-page-raw,details $i ncu --import $rep --csv --page raw,details --print-units base
    probe_export import-raw-apply-rules-no $i $raw --apply-rules no
    probe_export import-details-apply-rules-no $i $det --apply-rules no
  done
  # The wrapper's own export function, then the readers on each form (warm: imports done).
  timeout 120 python3 - $rep >> $W/exports.tsv 2> $W/logs/reads.err <<'EOF'
import sys, time
from pathlib import Path
from ncu_advisor.analysis.metric_use import lean_reading
from ncu_advisor.profiling.command import export_csvs
from ncu_advisor.readers import read_report
rep = Path(sys.argv[1])
lean = lean_reading()
t = time.monotonic(); raw, det = export_csvs("ncu", rep); took = time.monotonic() - t
rows = [("export_csvs (the wrapper's)", 1, took, 0)]
read_report([raw, det], **lean)  # imports and first-call costs, not timed
for label, paths, kw in (("read .ncu-rep (ncu_report) lean", [rep], lean),
                         ("read .ncu-rep (ncu_report) all", [rep], {}),
                         ("read CSV pages lean", [raw, det], lean),
                         ("read CSV pages all", [raw, det], {})):
    for i in (1, 2):
        t = time.monotonic(); r = read_report(paths, **kw)
        rows.append((label, i, time.monotonic() - t, len(r.ncu_rules)))
for label, i, took, rules in rows:
    print(f"{label}\t{i}\t{took:.3f}\t0\t0\t0\t{rules}")
EOF
  log "exports: $(wc -l < $W/exports.tsv) probe lines"
}

filter_probe() {  # filter_probe NAME NCU_OPTIONS...: the raw page of the probe program
  local name=$1; shift
  left $((DEADLINE - 20)) || { log "skip filter probe $name"; return; }
  echo "# ncu --clock-control none --metrics gpu__time_duration.sum,launch__shared_mem_per_block_dynamic --csv --page raw $*" > $W/filter/$name.csv
  timeout $(limit 60) ncu --clock-control none \
    --metrics gpu__time_duration.sum,launch__shared_mem_per_block_dynamic --csv --page raw \
    "$@" python3 scripts/probe/filter_mode_probe.py >> $W/filter/$name.csv 2>&1
  log "filter probe $name: exit $?"
}

filters() {
  filter_probe f1-function-name --filter-mode per-launch-config -c 1
  filter_probe f2-mangled --kernel-name-base mangled --filter-mode per-launch-config -c 1
  filter_probe f3-demangled --kernel-name-base demangled --filter-mode per-launch-config -c 1
  filter_probe f4-mangled-k --kernel-name-base mangled --filter-mode per-launch-config -c 1 \
    -k 'regex:^_Z2kT'
  filter_probe f5-mangled-printed-mangled --kernel-name-base mangled \
    --filter-mode per-launch-config -c 1 --print-kernel-base mangled
}

log "start; deadline ${DEADLINE}s for starting work, $REPEATS rounds"
{ host_facts; echo "ncu: $(command -v ncu)"; echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"; } \
  > $W/logs/host.txt 2>&1
python3 -m ncu_advisor.profiling.sections --check >> $W/logs/host.txt 2>&1 \
  || echo "WARNING: the shipped section file is out of date" >> $W/logs/host.txt
FORMS_APP=${FORMS_APP:-}
if [ -z "$FORMS_APP" ]; then
  FORMS_APP=/tmp/forms_app
  nvcc -O3 -lineinfo -o $FORMS_APP sample_programs/forms_app.cu > $W/logs/nvcc.log 2>&1 \
    || log "nvcc failed: $(tail -1 $W/logs/nvcc.log)"
fi
finish_stage setup

pairs forms_app "bare wrapper wrapper-nohtml" "" $FORMS_APP
finish_stage forms_app
exports
finish_stage exports
filters
finish_stage filters
for name in $CORPUS; do
  cmd=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "dev" {print $3}' sample_programs/corpus/captures.tsv)
  [ -n "$cmd" ] || { log "skip $name: not a dev program in captures.tsv"; continue; }
  pairs $name "bare wrapper" "--profile-from-start off" python3 sample_programs/corpus/$cmd
  finish_stage $name
done
if left $((DEADLINE - 30)); then
  timeout $(limit 60) python3 benchmarks/bench_wrapper.py --repeat 3 --no-analyze \
    > $W/logs/bench_wrapper_cpu.txt 2>&1
  finish_stage cpu
fi
finish_stage end
cat "$OUT/overhead_summary.txt"
log "finished"; ls -la "$OUT"
