# Helpers shared by the GPU-call scripts (source it): a clock, a log line, the host facts, and
# an archive packed after every stage so that a call cut off by its time limit still returns data.
# Expects OUT (the device tool's output folder) and W (a work folder holding what gets packed).
T0=${T0:-$(date +%s)}
elapsed() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(date +%T) +$(elapsed)s] $*"; }
host_facts() {  # what the machine is, for the provenance notes
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  ncu --version | tail -1
  date -u
  python3 -c "import sys, torch, triton, cupy, pandas; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'cupy', cupy.__version__, 'pandas', pandas.__version__)"
  nproc
}
pack() {  # pack W's folders named in $@ into $OUT/$ARCHIVE
  (cd "$W" && tar cJf "$OUT/$ARCHIVE" "$@")
}
