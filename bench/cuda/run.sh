#!/usr/bin/env bash
# On the H200 machine (the device tool), after scripts/device-test.sh has built build-gpu/: the
# speed runs of issue 12 (CUDA speed) on the full-size synthetic DeepSeek V4 Flash q2 model.
# For each mode (naive: the generic kernels, HALO_CUDA_NAIVE=1; fast: the default), one run with
# the per-op device-time profile (HALO_CUDA_PROFILE=1, printed by the backend at exit) and one
# without it (the speeds); then the device's copy bandwidth (PyTorch, bytes read + written) for
# the roofline fraction. Logs under $OUT.
#   [PROFILE=0] [COPYBW=0] bench/cuda/run.sh [LAYERS] [PROMPT] [GEN] [MODES] [DEPTH] [REPS]
set -uo pipefail
cd "$(dirname "$0")/../../build-gpu" || exit 1
out=${OUT:-/tmp/halo-out}
mkdir -p "$out"
source env.sh
layers=${1:-4} p=${2:-512} n=${3:-32} modes=${4:-naive fast} depth=${5:-0} reps=${6:-2}
model="dsv4-flash-q2:$layers"
for mode in $modes; do
    naive=0
    [ "$mode" = naive ] && naive=1
    log="$out/bench_${layers}L_$mode.txt"
    echo "== $mode: halo bench --synthetic $model --backend cuda -p $p -n $n -d $depth" | tee "$log"
    [ "${PROFILE:-1}" = 1 ] &&
        HALO_CUDA_NAIVE=$naive HALO_CUDA_PROFILE=1 timeout 200 src/cli/halo bench \
            --synthetic "$model" --backend cuda -p "$p" -n "$n" -d "$depth" -r 1 -o md 2>&1 |
        grep -v "^halo bench: \[" | grep -E "profile|^  |^\|" | tee -a "$log"
    HALO_CUDA_NAIVE=$naive timeout 200 src/cli/halo bench --synthetic "$model" --backend cuda \
        -p "$p" -n "$n" -d "$depth" -r "$reps" -o md 2>&1 | grep -E "^\||loaded" | tee -a "$log"
done
[ "${COPYBW:-1}" = 1 ] && echo "device copy bandwidth: $(python3 ../bench/cuda/copy_bw.py) GB/s (read + write)" 2>&1 | tee "$out/copy_bw.txt"
exit 0
