#!/usr/bin/env bash
# One lent GPU session's checks, in order of what they tell, within a deadline (never in CI):
#
#     bash tools/gpu_session.sh [SECONDS]        # default 420; logs to $OUT (or ./gpu-session-logs)
#
# 1. the machine (nvidia-smi, python, torch, transformers); where torch and transformers have no
#    bytecode and Python will not write it, compile it once into a cache of its own (PYTHONPYCACHEPREFIX);
# 2. tools/gpu_decode_probe.py: GPU decode's parts (nvJPEG, one thread and four; the batched resize);
# 3. tools/bench_throughput.py --only gpu: raw forward, the per-core prepare limit, djx end to end
#    (GPU_RUNS, by default: the default plan, GPU decode, scoring: workers, scoring: device);
# 4. tools/gpu_scorer_probe.py: the scorer's score_parts in one process, per group size;
#    tools/serial_ceiling.py: the main process's and the scorer's CPU per sample on this box's
#    cores when the device decodes (the simulated device, no GPU);
# 5. tools/gpu_check.py --only decode; then gpu_check's placement, oom, sharing, dtypes; which
#    image processor transformers gives CLIP and BLIP there (tools/gpu_processor_probe.py); then
#    gpu_check's scoring (three runs of its own); each while the deadline leaves it room.
# BENCH_PROFILE=decode,default samples those runs with py-spy (carry its wheel in .whl/), the
# collapsed stacks in $OUT.
# A folder .whl/ beside this repo's root (git-ignored) may hold wheels of what the machine lacks
# (multiprocess, dill, jsonlines) and djx's own wheel (for its entry points); they are installed in
# /tmp/site and djx itself is this checkout.
set -u
LIMIT=${1:-420}
START=$(date +%s)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOGS=${OUT:-$ROOT/gpu-session-logs}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl || exit 1
    rm -rf /tmp/site/djx && ln -s "$ROOT" /tmp/site/djx
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
fi
cd /tmp || exit 1

left() { echo $((LIMIT - ($(date +%s) - START))); }
step() {  # step NAME CAP_SECONDS COMMAND...: runs while the deadline leaves 30 s more than nothing
    local name=$1 cap=$2; shift 2
    local room; room=$(left)
    if [ "$room" -lt 30 ]; then echo "== $name: skipped, $room s left" | tee -a "$LOGS/session.log"; return; fi
    [ "$cap" -gt "$room" ] && cap=$room
    echo "== $name (at most $cap s; $(($(date +%s) - START)) s in)" | tee -a "$LOGS/session.log"
    timeout -k 5 "$cap" "$@" 2>&1 | grep --line-buffered -v -E "Writing model shards|it/s\]" >>"$LOGS/session.log"
    echo "== $name: exit ${PIPESTATUS[0]} after $(($(date +%s) - START)) s" | tee -a "$LOGS/session.log"
}

step machine 60 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc;
  python3 -c "import sys, torch, transformers, PIL; print(sys.version.split()[0], torch.__version__, torch.version.cuda,
  transformers.__version__, PIL.__version__)"
  python3 -c "import sys, os, importlib.util as u, torch; print(dict(dont_write_bytecode=sys.dont_write_bytecode,
  pycache_prefix=sys.pycache_prefix, torch_dir_writable=os.access(os.path.dirname(torch.__file__), os.W_OK),
  torch_pyc=os.path.exists(u.cache_from_source(torch.__file__))))"'  # why imports compiled from source there
# a pip install leaves bytecode beside the sources; where this box's torch and transformers have none
# and Python will not write it, every process compiles them from source (the last lent box: 60-70%
# of the scorer's import samples): compile them once into a cache of this session's, as pip would
# have at install, so the runs below measure djx, not the compiler (djx's plan warns of it too)
python3 -c "import sys; from djx.core.plan.bytecode import uncompiled; sys.exit(3 if uncompiled() else 0)"
if [ $? -eq 3 ]; then
    export PYTHONPYCACHEPREFIX=/tmp/djx-pycache
    step bytecode 150 bash -c 'python3 -m compileall -q -j 0 $(python3 -c "import os, sys; print(\" \".join(p for p in sys.path if p and os.path.isdir(p)))") >/dev/null 2>&1; echo compiled into $PYTHONPYCACHEPREFIX'
fi
step decode_probe 60 python3 -m djx.tools.gpu_decode_probe
step bench 240 python3 -m djx.tools.bench_throughput --only gpu --n 2000 --repeat 8 --run-timeout 75 \
    --gpu-runs "${GPU_RUNS:-default,decode,workers,device}"
step scorer_probe 70 python3 -m djx.tools.gpu_scorer_probe --n 384 --groups 32,128,352
step serial_ceiling 60 python3 -m djx.tools.serial_ceiling
step decode 100 python3 -m djx.tools.gpu_check --only decode
for check in placement oom sharing dtypes; do
    step "$check" 150 python3 -m djx.tools.gpu_check --only "$check"
done
step processor 40 python3 -m djx.tools.gpu_processor_probe
# last: three 2,000-sample runs of their own (16 workers loading full-size CLIP among them), more
# than the 150 s three sessions gave it
step scoring 240 python3 -m djx.tools.gpu_check --only scoring
echo "session: $(($(date +%s) - START)) s" | tee -a "$LOGS/session.log"
grep -E "^(== |###|raw |per-|CPU per sample|device decode of|scorer probe|bare towers|  (clip|blip) pixels|start-up parts|[0-9,.]+ samples|time:|scoring|  (workers|device|killed)|.*(passed|FAILED))" "$LOGS/session.log" | head -120
