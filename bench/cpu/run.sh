#!/usr/bin/env bash
# CPU prefill/decode: halo against llama.cpp on the same GGUF and thread count, in one run,
# several rounds, each round halo then llama-bench back to back (on a shared machine the load
# moves between rounds; a ratio is only taken within a round). Prints every round, the median
# ratios, the memory read bandwidth and the fraction of it decode reaches. Not a test: speed
# claims come from here (bench/cpu/RESULTS.md).
#
#   bench/cpu/run.sh [MODEL.gguf] [THREADS] [ROUNDS]      (defaults: the medium model, nproc, 3)
#
# MODEL defaults to a medium synthetic model (bench/cpu/make_medium.c: DeepSeek V4 Flash's real
# per-layer shapes in ds4's q2 mix, 4 layers, random blocks; ~8.9 GiB under /tmp/halo-bench).
# Tests: pp128, pp512 (prefill in one batch) and tg32 (decode from an empty context), as
# llama-bench's -p 128,512 -n 32; bench_cpu warms each test up untimed first, as llama-bench
# does (its default: one prompt run of the same length, one decoded token).
# llama-bench comes from LLAMA_BENCH, else /tmp/llbench/bin/llama-bench, built from the
# llama.cpp v0.5.0 bundle in npm's node-llama-cpp@3.22.1 (see tools/oracle/README.md step 1,
# target llama-bench). BIN=dir takes bench_cpu, bench_membw and bench_make_medium from dir
# instead of building them (the device run carries static binaries).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-/tmp/halo-bench/medium.gguf}
threads=${2:-$(nproc)}
rounds=${3:-3}
llama_bench=${LLAMA_BENCH:-/tmp/llbench/bin/llama-bench}
bin=${BIN:-build/bench}

if [ -z "${BIN:-}" ]; then
    make -s deps >/dev/null && cmake -S . -B build >/dev/null &&
        cmake --build build --target bench_cpu bench_make_medium bench_membw >/dev/null
fi
if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "writing the medium model to $model ..." >&2
    "$bin/bench_make_medium" "$model" 4
fi
[ -x "$llama_bench" ] || { echo "run.sh: llama-bench not found at $llama_bench" >&2; exit 1; }

echo "model $model, $threads threads, $rounds rounds,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
out=$(mktemp -d)
# Odd rounds run halo first, even rounds llama-bench first: a machine whose load or bandwidth
# drifts within a round then favours neither program over the run.
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then
        "$bin/bench_cpu" "$model" 128,512 32 "$threads" 1 >"$out/halo.$r"
        "$llama_bench" -m "$model" -t "$threads" -p 128,512 -n 32 -r 1 -o csv >"$out/llama.$r" 2>/dev/null
    else
        "$llama_bench" -m "$model" -t "$threads" -p 128,512 -n 32 -r 1 -o csv >"$out/llama.$r" 2>/dev/null
        "$bin/bench_cpu" "$model" 128,512 32 "$threads" 1 >"$out/halo.$r"
    fi
done
"$bin/bench_membw" "$threads" "$model" >"$out/membw"
python3 - "$out" "$rounds" <<'PY'
import csv, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
tests = ["pp128", "pp512", "tg32"]
kv = dict(l.split() for l in open(f"{out}/membw"))
bw, dec_bytes = float(kv["membw_gbs"]), float(kv["decode_bytes"])
ratios = {t: [] for t in tests}
print("round | " + " | ".join(f"{t} halo / llama.cpp tok/s (ratio)" for t in tests))
for r in range(1, rounds + 1):
    halo = {l.split()[0]: float(l.split()[1]) for l in open(f"{out}/halo.{r}") if l[:2] in ("pp", "tg")}
    llama = {}
    for row in csv.DictReader(open(f"{out}/llama.{r}")):
        name = f"pp{row['n_prompt']}" if row["n_gen"] == "0" else f"tg{row['n_gen']}"
        llama[name] = float(row["avg_ts"])
    cells = []
    for t in tests:
        ratios[t].append(halo[t] / llama[t])
        cells.append(f"{halo[t]:.2f} / {llama[t]:.2f} ({halo[t] / llama[t]:.2f}x)")
    print(f"{r} | " + " | ".join(cells))
    if r == 1:
        tg_h, tg_l = [], []
    tg_h.append(halo["tg32"]); tg_l.append(llama["tg32"])
print("median ratio: " + ", ".join(f"{t} {statistics.median(ratios[t]):.2f}x" for t in tests))
gb = dec_bytes / 1e9
print(f"memory read bandwidth {bw:.1f} GB/s; decode reads {gb:.2f} GB of weights per token: "
      f"halo reaches {statistics.median(tg_h) * gb / bw:.0%}, llama.cpp {statistics.median(tg_l) * gb / bw:.0%}")
PY
rm -rf "$out"
