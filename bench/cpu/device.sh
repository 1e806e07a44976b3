#!/usr/bin/env bash
# bench/cpu/run.sh on the H200 machine's CPU (the `run` tool; no GPU used), from binaries
# built on the development VM and carried in .carry/cpu (bench/cpu/carry.sh packs them into
# .carry/cpu/bin.tar.xz, which this script unpacks; see bench/cpu/RESULTS.md):
#   .carry/cpu/bin/{bench_cpu,bench_membw,bench_make_medium}   halo's, this tree
#   .carry/cpu/bin/bench_matvec   (if present) the output head's matvec against plain reads
#   .carry/cpu/lib/{libcjson.so.1,liburing.so.2}                their Debian 12 libraries
#   .carry/cpu/llama-bench   llama.cpp v0.5.0, static, -DGGML_NATIVE=OFF with explicit AVX-512
#                            flags and no AMX (GGML_NATIVE's AMX buffer type aborts deepseek4)
# The medium model is written to /dev/shm. THREADS (default "16 8") and ROUNDS (default 2).
# AB=1 (the default) ends with an A/B of the one-token kernels' software prefetch (on by default
# on Intel CPUs, src/quant/quant.c) in one process: halo's tg32 at 16 threads, repetitions
# cycling through BENCH_AB's settings (~15 s). AB=0 skips it. MATVEC_VARIANTS (bench_matvec)
# passes through. The model is removed at the end unless KEEP_MODEL=1.
set -u
cd "$(dirname "$0")/../.."
c=$PWD/.carry/cpu
if [ ! -x "$c/bin/bench_cpu" ] && [ -f "$c/bin.tar.xz" ]; then tar xJf "$c/bin.tar.xz" -C "$c"; fi
export LD_LIBRARY_PATH=$c/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
m=/dev/shm/halo-medium.gguf
t0=$(date +%s)
nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2
[ -f $m ] || "$c/bin/bench_make_medium" $m 4 || exit 1
echo "[+$(( $(date +%s) - t0 ))s] model written"
for t in ${THREADS:-16 8}; do
    LLAMA_BENCH=$c/llama-bench BIN=$c/bin bench/cpu/run.sh $m "$t" "${ROUNDS:-2}"
    [ -x "$c/bin/bench_matvec" ] && "$c/bin/bench_matvec" "$t" # the one-token Q8_0 read pattern
    echo "[+$(( $(date +%s) - t0 ))s] $t threads done"
done
if [ "${AB:-1}" = 1 ]; then
    # One process, repetitions cycling through the settings (bench_cpu's BENCH_AB): Q8_0 rows
    # and IQ2_XXS/Q2_K rows prefetched 2 KiB ahead (Intel's default), both 8 KiB ahead (the
    # Zen 5 VM's default), none, and Q8_0 rows 8 KiB with the others 2 KiB.
    BENCH_AB=${BENCH_AB:-2048:2048,8192:8192,0:0,8192:2048} \
        timeout 60 "$c/bin/bench_cpu" $m 8 32 16 8 | grep '^tg'
    echo "[+$(( $(date +%s) - t0 ))s] A/B done"
fi
[ "${KEEP_MODEL:-0}" = 1 ] || rm -f $m # 8.85 GiB of /dev/shm
