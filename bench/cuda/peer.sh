#!/usr/bin/env bash
# Issue 12's table on the H200 machine (the device tool): halo CUDA against llama.cpp v0.5.0 CUDA
# on the same GGUF in the same call. pp512, pp2048 and tg64 at depth 0 (-r REPS), pp2048 and tg64
# at depth 24,576 (-r 1), then the ratios. Not a test: speed claims come from here
# (bench/cuda/RESULTS.md).
#
#   LLAMA_BENCH=path [LAYERS=43] [DEPTH=0] [REPS=2] bench/cuda/peer.sh
#
# halo: build-gpu/ from scripts/device-setup.sh (run first). The model: halo's synthetic
# DeepSeek V4 Flash q2 (real shapes) written once to /dev/shm by `halo bench --write-gguf`, so
# both engines read one file; weights in device memory for both (llama.cpp -ngl 99, halo
# --weights device). LLAMA_BENCH: llama.cpp v0.5.0's llama-bench built with GGML_CUDA for sm_90
# (static ggml; bench/cuda/build_llama_cuda.sh builds one on the dev VM to carry, and
# ../shared/peers/llamacpp_h200.sh one on the device). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=$(pwd)
layers=${LAYERS:-43} reps=${REPS:-2}
out=${OUT:-/tmp/halo-out}
mkdir -p "$out"
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
[ -x build-gpu/src/cli/halo ] || { echo "peer.sh: build-gpu/ missing: scripts/device-setup.sh first"; exit 1; }
[ -x "${LLAMA_BENCH:-}" ] || { echo "peer.sh: LLAMA_BENCH (llama.cpp's CUDA llama-bench) not set"; exit 1; }
source build-gpu/env.sh
halo=$R/build-gpu/src/cli/halo
model=/dev/shm/halo-dsv4-q2-$layers.gguf
if [ ! -f "$model" ]; then
    # tmpfs holds half the RAM by default: the 43-layer file is 81 GiB of the machine's 128
    [ "$layers" -gt 30 ] && mount -o remount,size=110G /dev/shm 2>/dev/null
    "$halo" bench --synthetic "dsv4-flash-q2:$layers" --write-gguf "$model.part" \
        >"$out/write-gguf.log" 2>&1 && mv "$model.part" "$model" ||
        { tail -20 "$out/write-gguf.log"; rm -f "$model.part"; exit 1; }
    el "model written: $(du -h "$model" | cut -f1)"
fi
lb() { "$LLAMA_BENCH" -m "$model" -ngl 99 "$@" 2>>"$out/llamacpp-cuda.err"; }
hb() { "$halo" bench -m "$model" --backend cuda --weights device "$@" 2>>"$out/halo-cuda.err"; }
for eng in llamacpp halo; do
    f=lb; [ $eng = halo ] && f=hb
    { $f -p 512,2048 -n 64 -r "$reps" -o csv
      [ "${DEPTH:-1}" = 0 ] || $f -p 2048 -n 64 -d 24576 -r 1 -o csv | grep -v "^build_commit"
    } >"$out/$eng-cuda.csv"
    el "$eng done"
done
grep -m2 -E "CUDA devices|Device 0|rror" "$out/llamacpp-cuda.err"
grep -E "rror" "$out/halo-cuda.err" | head -5
awk -F'","|^"|"$' -v engine=CUDA -f bench/compare_llama.awk "$out/llamacpp-cuda.csv" \
    "$out/halo-cuda.csv" | tee "$out/compare.md"
# Decode's fraction of the roofline: halo's weight bytes a token (bench's bytes_per_token, from
# the plan) x tok/s over the copy bandwidth measured here (PyTorch, bytes read + written).
bw=$(python3 bench/cuda/copy_bw.py 2>/dev/null)
echo "device copy bandwidth: ${bw:-?} GB/s (read + write)" | tee -a "$out/compare.md"
[ -n "$bw" ] && awk -F'","|^"|"$' -v bw="$bw" '
    FNR == 1 { nh = split($0, h, ","); for (i = 1; i <= nh; i++) col[h[i]] = i + 1; next }
    $col["n_gen"] > 0 { d = $col["n_depth"] + 0
        printf "halo tg%d%s: %.2f t/s x %.2f GB a token = %.0f GB/s, %.1f %% of %s GB/s\n",
            $col["n_gen"], d ? " @ d" d : "", $col["avg_ts"], $col["bytes_per_token"] / 1e9,
            $col["avg_ts"] * $col["bytes_per_token"] / 1e9,
            100 * $col["avg_ts"] * $col["bytes_per_token"] / 1e9 / bw, bw }' \
    "$out/halo-cuda.csv" | tee -a "$out/compare.md"
el "done: $out/compare.md"
