#!/usr/bin/env bash
# bench/cpu/run.sh on the H200 machine's CPU (the `run` tool; no GPU used), from binaries
# built on the development VM and carried in .carry/cpu (see bench/cpu/RESULTS.md):
#   .carry/cpu/bin/{bench_cpu,bench_membw,bench_make_medium}   halo's, this tree
#   .carry/cpu/bin/bench_matvec   (if present) the output head's matvec against plain reads
#   .carry/cpu/lib/{libcjson.so.1,liburing.so.2}                their Debian 12 libraries
#   .carry/cpu/llama-bench   llama.cpp v0.5.0, static, -DGGML_NATIVE=OFF with explicit AVX-512
#                            flags and no AMX (GGML_NATIVE's AMX buffer type aborts deepseek4)
# The medium model is written to /dev/shm. THREADS (default "16 8") and ROUNDS (default 2).
# AB=1 (the default) ends with an A/B of the one-token kernels' software prefetch (on by default
# on Intel CPUs, src/quant/quant.c): halo's tg32 at 16 threads with it (2 KiB ahead), without
# it for the IQ2_XXS/Q2_K rows, without any, and with Q8_0 rows 4 KiB ahead, alternated twice
# (each after a pp8 in the same process, so the decode is not the process's first; ~35 s).
# AB=0 skips it.
set -u
cd "$(dirname "$0")/../.."
c=$PWD/.carry/cpu
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
    for cyc in 1 2; do
        for v in "HALO_Q8_PREFETCH=2048 HALO_ROW_PREFETCH=2048" "HALO_ROW_PREFETCH=0" \
                 "HALO_Q8_PREFETCH=0 HALO_ROW_PREFETCH=0" "HALO_Q8_PREFETCH=4096"; do
            echo "prefetch A/B, 16 threads, $v: $(env $v "$c/bin/bench_cpu" $m 8 32 16 3 |
                awk '/^tg/ {printf "%s ", $2}')tok/s"
        done
    done
    echo "[+$(( $(date +%s) - t0 ))s] A/B done"
fi
