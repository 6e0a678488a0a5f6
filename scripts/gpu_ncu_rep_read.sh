#!/usr/bin/env bash
# GPU call of 2026-12-01 (issue 10): the 3-step holdout report (sample_programs/holdout_step.py),
# again, then reading it as .ncu-rep and as raw CSV (time, peak memory, same advice, names).
set -u
OUT=${OUT:-/tmp/out}; W=/tmp/s5; rm -rf $W; mkdir -p $W /tmp/reps
ARCHIVE=s5.tar.xz
. scripts/gpu_lib.sh   # pack
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site
date -u > $W/host.txt; ncu --version | tail -1 >> $W/host.txt
timeout 300 ncu --set full --clock-control none --profile-from-start off -f -o /tmp/reps/holdout_big \
  python3 sample_programs/holdout_step.py --iters 3 > $W/holdout_big.ncu.log 2>&1
echo "rc=$?" >> $W/holdout_big.ncu.log; ls -la /tmp/reps >> $W/sizes.txt
ncu --import /tmp/reps/holdout_big.ncu-rep --csv --page raw > /tmp/big.raw.csv 2>/dev/null
ls -la /tmp/big.raw.csv >> $W/sizes.txt
T="$W/time.txt"
for i in 1 2; do
  /usr/bin/time -f "bare_read_csv %e s %M KB" python3 -c "import pandas, sys; pandas.read_csv(sys.argv[1])" /tmp/big.raw.csv 2>> $T
  /usr/bin/time -f "analyze_rep_json %e s %M KB" python3 -m ncu_advisor.cli analyze /tmp/reps/holdout_big.ncu-rep -f json -o /tmp/big.rep.json 2>> $T
  /usr/bin/time -f "analyze_raw_json %e s %M KB" python3 -m ncu_advisor.cli analyze /tmp/big.raw.csv -f json -o /tmp/big.raw.json 2>> $T
  /usr/bin/time -f "analyze_rep_text %e s %M KB" python3 -m ncu_advisor.cli analyze /tmp/reps/holdout_big.ncu-rep -o /tmp/big.rep.txt 2>> $T
done
python3 - > $W/same.txt 2>&1 <<'PY'
import json
rep, raw = (json.load(open(p)) for p in ("/tmp/big.rep.json", "/tmp/big.raw.json"))
print("launches", len(rep["kernels"]), len(raw["kernels"]))
key = lambda k: sorted((f["rule"], f["severity"], f["confidence"]) for f in k["findings"])
diff = 0
for a, b in zip(rep["kernels"], raw["kernels"]):
    if key(a) != key(b) or a["origin"] != b["origin"] or a["id"] != b["id"]:
        diff += 1; print("DIFF", a["id"], b["id"], a["origin"], b["origin"], a["short_name"], key(a), key(b))
print("findings", sum(len(k["findings"]) for k in rep["kernels"]), sum(len(k["findings"]) for k in raw["kernels"]), "launches differing", diff)
for a, b in zip(rep["kernels"][:32], raw["kernels"][:32]):
    print("NAME", a["id"], a["origin"], "|", a["name"][:150]); print("    ", b["id"], b["origin"], "|", b["name"][:150])
PY
cp /tmp/big.rep.txt $W/big.rep.analyze.txt
cat $T; grep -v NAME $W/same.txt | tail -5
pack .
