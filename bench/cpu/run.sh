#!/usr/bin/env bash
# CPU prefill/decode: halo against llama.cpp on the same GGUF, the same thread count, in one
# run. Prints both and the ratios. Not a test: speed claims come from here.
#
#   bench/cpu/run.sh [MODEL.gguf] [THREADS] [PROMPT] [DECODE]
#
# MODEL defaults to a medium synthetic model (bench/cpu/make_medium.c: DeepSeek V4 Flash's real
# per-layer shapes in ds4's q2 mix, 4 layers, random blocks; ~8.9 GiB under /tmp/halo-bench).
# llama-bench comes from LLAMA_BENCH, else /tmp/llbench/bin/llama-bench, built from the
# llama.cpp v0.5.0 bundle in npm's node-llama-cpp@3.22.1 (see tools/oracle/README.md step 1,
# target llama-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-/tmp/halo-bench/medium.gguf}
threads=${2:-$(nproc)}
pp=${3:-64}
tg=${4:-16}
llama_bench=${LLAMA_BENCH:-/tmp/llbench/bin/llama-bench}

make -s deps >/dev/null && cmake -S . -B build >/dev/null && cmake --build build --target bench_cpu bench_make_medium >/dev/null
if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "writing the medium model to $model ..." >&2
    build/bench/bench_make_medium "$model" 4
fi
[ -x "$llama_bench" ] || { echo "run.sh: llama-bench not found at $llama_bench" >&2; exit 1; }

echo "model $model, $threads threads, pp$pp tg$tg, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
halo_out=$(build/bench/bench_cpu "$model" "$pp" "$tg" "$threads")
echo "$halo_out" | sed 's/^/halo:  /'
# llama.cpp: the same prompt and decode lengths; -r 1 as halo measures one run (warm cache).
llama_out=$("$llama_bench" -m "$model" -t "$threads" -p "$pp" -n "$tg" -r 1 -o csv 2>/dev/null)
echo "$llama_out" | sed 's/^/llama: /' | head -5
lpp=$(echo "$llama_out" | python3 -c '
import csv,sys
rows=list(csv.DictReader(sys.stdin))
pp=[r for r in rows if r["n_prompt"]!="0"]; tg=[r for r in rows if r["n_gen"]!="0"]
print(pp[0]["avg_ts"] if pp else "nan", tg[0]["avg_ts"] if tg else "nan")')
hpp=$(echo "$halo_out" | awk '/^pp/ {print $2}')
htg=$(echo "$halo_out" | awk '/^tg/ {print $2}')
read -r lpp_v ltg_v <<<"$lpp"
python3 - "$hpp" "$htg" "$lpp_v" "$ltg_v" <<'PY'
import sys
hpp, htg, lpp, ltg = map(float, sys.argv[1:])
print(f"prefill: halo {hpp:.2f} tok/s, llama.cpp {lpp:.2f} tok/s, ratio {hpp/lpp:.2f}x")
print(f"decode:  halo {htg:.2f} tok/s, llama.cpp {ltg:.2f} tok/s, ratio {htg/ltg:.2f}x")
PY
