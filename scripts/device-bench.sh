#!/usr/bin/env bash
# On the GPU machine after scripts/device-test.sh: first prefill/decode speeds of the full-size
# synthetic DeepSeek V4 Flash (q2 mix, 43 layers, 80.76 GiB, made in place) with the weights in
# device memory and in GPU-visible host memory. Logs under $OUT.
#   scripts/device-bench.sh [LAYERS] [PROMPT] [GEN] [SECONDS_EACH] [POLICIES]
# (halo bench passes its --weights to the engine through HALO_WEIGHTS, so it is given there.)
set -uo pipefail
cd "$(dirname "$0")/../build-gpu"
out=${OUT:-/tmp/halo-out}
source env.sh
layers=${1:-43} p=${2:-512} n=${3:-32} limit=${4:-240}
for w in ${5:-device host}; do
    echo "== weights $w: halo bench --synthetic dsv4-flash-q2:$layers --backend cuda -p $p -n $n"
    timeout "$limit" src/cli/halo bench --synthetic "dsv4-flash-q2:$layers" --weights "$w" \
        --backend cuda -p "$p" -n "$n" -r 1 -o md 2>&1 | tee "$out/bench_q2_${layers}_$w.txt"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader
done
