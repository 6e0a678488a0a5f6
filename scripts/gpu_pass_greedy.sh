#!/usr/bin/env bash
# GPU probe (issue 13): what each metric of the advisor set costs in ncu replay passes.
# One tiny kernel (scripts/probe/tiny.cu), then:
#   stock   passes of ncu's own sets/sections and of the current advisor section;
#   single  each hardware-counter metric alone (scripts/probe/singles.txt);
#   cumul   the advisor metrics added one at a time in scripts/probe/cumulative.txt's order
#           (first line: the launch__/device__ attributes as one group), passes after each;
#   variant each candidate metric list in scripts/probe/variants/ (what dropping or adding a
#           group costs or saves).
# PHASES (default "stock cumul single variant") picks the phases.
# The lists are written by scripts/probe/make_lists.py.
# Writes $OUT/pass_greedy.tsv (phase, name, passes, seconds) as it goes; stops a phase when
# BUDGET seconds (default 420) are spent.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUDGET=${BUDGET:-420}
. scripts/gpu_lib.sh   # left, elapsed (T0 set here)
nvcc -arch=sm_90 -O3 -o /tmp/tiny scripts/probe/tiny.cu || exit 1
tsv=$OUT/pass_greedy.tsv
{ echo "# $(ncu --version | tail -1); $(date -u); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"; } > $tsv
probe() {  # phase name ncu-args...
  local phase=$1 name=$2; shift 2
  local t0=$(date +%s.%N)
  timeout 60 ncu --clock-control none -c 1 "$@" /tmp/tiny > /tmp/probe.log 2>&1
  local passes=$(grep -o -- '- [0-9]* pass' /tmp/probe.log | head -1 | grep -o '[0-9]*')
  local err=$(grep -m1 "==ERROR==" /tmp/probe.log | tr '\t' ' ')
  local t1=$(date +%s.%N)
  printf '%s\t%s\t%s\t%.1f\t%s\n' "$phase" "$name" "${passes:-?}" "$(python3 -c "print($t1-$t0)")" "$err" >> $tsv
}
PHASES=${PHASES:-stock cumul single variant}
has() { [[ " $PHASES " == *" $1 "* ]]; }
SECTIONS=$(PYTHONPATH=$PWD python3 -c "import shutil; from ncu_advisor import collect; print(collect.stock_section_folder(shutil.which('ncu')))")
if has stock; then
probe stock set_full --set full
probe stock set_basic --set basic
for s in SpeedOfLight LaunchStats Occupancy; do probe stock "section_$s" --section $s; done
probe stock advise_section --section-folder ncu_advisor/data/sections --section NcuAdvise
probe stock advise_set --section-folder "$SECTIONS" --section-folder ncu_advisor/data/sections \
  --section NcuAdvise --section SpeedOfLight --section LaunchStats --section Occupancy
fi
if has variant; then
  for v in scripts/probe/variants/*.txt; do probe variant "$(basename "$v" .txt)" --metrics "$(cat "$v")"; done
fi
acc=""
while has cumul && read -r metric; do
  left "$BUDGET" || break
  acc=${acc:+$acc,}$metric
  probe cumul "$metric" --metrics "$acc"
done < scripts/probe/cumulative.txt
while has single && read -r metric; do
  left "$BUDGET" || break
  probe single "$metric" --metrics "$metric"
done < scripts/probe/singles.txt
echo "done in $(elapsed) s" >> $tsv
