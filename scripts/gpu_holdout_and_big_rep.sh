#!/usr/bin/env bash
# The held-out program and reading a large .ncu-rep (issue 10, and a held-out set for scoring
# advice; GPU call of 2026-12-01, once gpu_session4.sh):
# 1. sample_programs/holdout_step.py, one step under --set full, exported as details CSV, raw CSV
#    and plain text (gzipped), for sample_reports/holdout/;
# 2. the same program for 3 steps into a large .ncu-rep, then the whole-process time and peak
#    memory of `ncu-advise analyze` on it and on its raw CSV export, beside a bare
#    pandas.read_csv, and whether both forms give every launch the same findings.
# Packs $OUT/s4.tar.xz after every stage (a cut-off run still returns data).
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/s4; rm -rf $W; mkdir -p $W/holdout $W/logs /tmp/reps
export PYTHONUNBUFFERED=1
ARCHIVE=s4.tar.xz; DIRS="holdout logs"
. scripts/gpu_lib.sh   # log (T0 set here), gpu_facts, pack
# pydantic and orjson are not installed there (ncu_report comes from the ncu install).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site
{ gpu_facts
  python3 -c "import torch, triton, pandas, orjson; print('python', __import__('sys').version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'pandas', pandas.__version__, 'orjson', orjson.__version__)"
  nproc; free -g | head -2; } > $W/logs/host.txt 2>&1
cat $W/logs/host.txt
C="--clock-control none"

log "profile holdout_step"
timeout 200 ncu --set full $C --nvtx --profile-from-start off -f -o /tmp/reps/holdout_step \
  python3 sample_programs/holdout_step.py > $W/logs/holdout_step.ncu.log 2>&1
echo "rc=$?" >> $W/logs/holdout_step.ncu.log
ncu --import /tmp/reps/holdout_step.ncu-rep --csv > $W/holdout/holdout_step.details.csv 2>> $W/logs/holdout_step.import.log
ncu --import /tmp/reps/holdout_step.ncu-rep --csv --page raw > $W/holdout/holdout_step.raw.csv 2>> $W/logs/holdout_step.import.log
ncu --import /tmp/reps/holdout_step.ncu-rep > $W/holdout/holdout_step.txt 2>> $W/logs/holdout_step.import.log
gzip -n -9 $W/holdout/*.csv $W/holdout/*.txt
ls -la /tmp/reps $W/holdout >> $W/logs/holdout_step.import.log
pack $DIRS

log "profile holdout_big (3 steps)"
timeout 270 ncu --set full $C --profile-from-start off -f -o /tmp/reps/holdout_big \
  python3 sample_programs/holdout_step.py --iters 3 > $W/logs/holdout_big.ncu.log 2>&1
echo "rc=$?" >> $W/logs/holdout_big.ncu.log
ls -la /tmp/reps > $W/logs/big_sizes.txt
log "export raw"
/usr/bin/time -f "export_raw %e s %M KB" ncu --import /tmp/reps/holdout_big.ncu-rep --csv --page raw \
  > /tmp/holdout_big.raw.csv 2>> $W/logs/big_time.txt
ls -la /tmp/holdout_big.raw.csv >> $W/logs/big_sizes.txt
pack $DIRS
log "measure"
for i in 1 2; do
  /usr/bin/time -f "bare_read_csv %e s %M KB" python3 -c "import pandas, sys; pandas.read_csv(sys.argv[1])" /tmp/holdout_big.raw.csv 2>> $W/logs/big_time.txt
  /usr/bin/time -f "analyze_rep_json %e s %M KB" python3 -m ncu_advisor.cli analyze /tmp/reps/holdout_big.ncu-rep -f json -o /tmp/big.rep.json 2>> $W/logs/big_time.txt
  /usr/bin/time -f "analyze_raw_json %e s %M KB" python3 -m ncu_advisor.cli analyze /tmp/holdout_big.raw.csv -f json -o /tmp/big.raw.json 2>> $W/logs/big_time.txt
  /usr/bin/time -f "analyze_rep_text %e s %M KB" python3 -m ncu_advisor.cli analyze /tmp/reps/holdout_big.ncu-rep -o /tmp/big.rep.txt 2>> $W/logs/big_time.txt
done
cp /tmp/big.rep.txt $W/logs/big.rep.analyze.txt
python3 - > $W/logs/big_same_advice.txt 2>&1 <<'PY'
import json
rep, raw = (json.load(open(p)) for p in ("/tmp/big.rep.json", "/tmp/big.raw.json"))
print("launches", len(rep["kernels"]), len(raw["kernels"]))
def advice(doc):
    return {(k["id"], k["name"]): sorted((f["rule"], f["severity"], f["confidence"]) for f in k["findings"])
            for k in doc["kernels"]}
a, b = advice(rep), advice(raw)
diff = [key for key in a if a[key] != b.get(key)]
print("findings", sum(map(len, a.values())), sum(map(len, b.values())), "launches differing", len(diff))
for key in diff[:10]:
    print(key[0], key[1][:60], a[key], b.get(key))
PY
cat $W/logs/big_time.txt $W/logs/big_same_advice.txt
pack $DIRS
ls -la $OUT; log done
