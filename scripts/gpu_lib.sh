# Helpers shared by the GPU-call scripts (source it): a clock, a log line, the host facts, and
# an archive packed after every stage so that a call cut off by its time limit still returns data.
# Expects OUT (the device tool's output folder) and W (a work folder holding what gets packed).
T0=${T0:-$(date +%s)}
elapsed() { echo $(( $(date +%s) - T0 )); }  # seconds since T0 (set when this file is sourced)
log() { echo "[$(date +%T) +$(elapsed)s] $*"; }  # a log line stamped with clock time and elapsed
left() { [ $(elapsed) -lt "$1" ]; }  # true while fewer than $1 seconds have passed since T0
gpu_facts() {  # GPU (nvidia-smi fields $1, default name,driver_version), ncu version, UTC date
  nvidia-smi --query-gpu=${1:-name,driver_version} --format=csv
  ncu --version | tail -1
  date -u
}
host_facts() {  # what the machine is, for the provenance notes
  gpu_facts name,driver_version,clocks.max.sm,clocks.max.mem
  python3 -c "import sys, torch, triton, cupy, pandas; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'cupy', cupy.__version__, 'pandas', pandas.__version__)"
  nproc
}
pack() {  # pack W's folders named in $@ into $OUT/$ARCHIVE
  (cd "$W" && tar cJf "$OUT/$ARCHIVE" "$@")
}
wheels() {  # no pydantic: install the .whl/ wheels into /tmp/site, append it to PYTHONPATH (set)
  if ! python3 -c "import pydantic" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
  fi
}
