#!/usr/bin/env bash
# How sample_reports/occupancy/occ_probe*.import.raw.base.csv were captured (2026-11-29, H200):
# build each probe, run it under ncu with the two occupancy sections, export the raw page.
set -u
OUT=${OUT:-/tmp/out}
cd "$(dirname "$0")/.."
for p in occ_probe occ_probe2; do
  nvcc -arch=sm_90 -O3 -o /tmp/$p sample_programs/$p.cu || exit 1
  ncu --section LaunchStats --section Occupancy --clock-control none -o $OUT/$p /tmp/$p \
      > $OUT/$p.ncu.stdout 2>&1
  ncu --import $OUT/$p.ncu-rep --csv --page raw --print-units base > $OUT/$p.import.raw.base.csv
done
