#!/usr/bin/env bash
# halo serve: aggregate decode tok/s at 1, 4 and 8 concurrent streams, then a load run.
# Not a test; figures go to bench/serve/RESULTS.md.
#
#   bench/serve/run.sh [MODEL.gguf] [TOKENS] [LOAD_SECONDS]
#
# MODEL defaults to the medium synthetic model of bench/cpu (make_medium, 4 layers, ~8.9 GiB
# under /tmp/halo-bench; written when missing). The load run (64 connections, -np 8,
# --queue 16) uses the same model; LOAD_SECONDS=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-/tmp/halo-bench/medium.gguf}
tokens=${2:-32}
load_s=${3:-60}

cmake -S . -B build >/dev/null && cmake --build build --target halo bench_make_medium >/dev/null
if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "writing the medium model to $model ..." >&2
    build/bench/bench_make_medium "$model" 4
fi

log=$(mktemp)
# Synthetic models have no vocabulary: the embedded model's tokenizer stands in.
build/src/cli/halo serve -m "$model" --tokenizer models/kjv-tiny.gguf --port 0 -np 8 --queue 16 \
    --ctx 1024 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do grep -q "ready:" "$log" && break; sleep 1; done
grep -q "ready:" "$log" || { cat "$log" >&2; exit 1; }
port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log")
echo "model $model, -np 8, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
node bench/serve/bench.mjs "http://127.0.0.1:$port" streams "$tokens"
[ "$load_s" = 0 ] || node bench/serve/bench.mjs "http://127.0.0.1:$port" load 64 "$load_s" "$pid"
grep -v "listening on" "$log" | sed 's/^/server: /' # the weights' placement (streamed experts?)
