#!/usr/bin/env bash
# Expert streaming benchmark (not a test): decode with routed experts streamed from disk through
# caches of 25, 50 and 75 % of the experts (PCTS; 0 = resident), with and without prefetch
# (MODES: HALO_STREAM_PREFETCH values), and the disk's own O_DIRECT read rate: dd (one stream)
# right before each run, and io_uring with 64 reads in flight by bench_stream after its decode.
# Results and the estimates derived from them: bench/stream/RESULTS.md.
#
#   [PCTS="25 50 75"] [MODES="none all"] bench/stream/run.sh [MODEL.gguf] [THREADS] [PROMPT] [DECODE]
#
# MODEL defaults to the medium synthetic model (bench/cpu/make_medium.c: DeepSeek V4 Flash's real
# layer shapes, LAYERS layers (default 4: 8.85 GiB; 6: 12.5 GiB), the first 3 hash-routed)
# written under /tmp/halo-bench if missing. Never commit it.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-/tmp/halo-bench/medium.gguf}
threads=${2:-$(nproc)}
pp=${3:-64}
tg=${4:-48}

cmake -S . -B build >/dev/null && cmake --build build -j2 --target bench_stream bench_stream_replay bench_make_medium >/dev/null
if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "writing the medium model to $model ..." >&2
    build/bench/bench_make_medium "$model" "${LAYERS:-4}"
fi
size=$(stat -c %s "$model")

dd_rate() { # 1 GiB of O_DIRECT 8 MiB reads at a pseudo-random place in the file
    local skip=$(( (RANDOM * 32768 + RANDOM) % (size / 8388608 - 128) ))
    dd if="$model" of=/dev/null bs=8M count=128 skip="$skip" iflag=direct 2>&1 |
        awk '/copied/ {print $(NF-1), $NF}'
}

echo "model $model ($(numfmt --to=iec "$size")), $threads threads, pp$pp tg$tg"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; RAM $(free -g | awk '/Mem:/ {print $2}') GiB"
# Each cache size with each prefetch mode (HALO_STREAM_PREFETCH), modes interleaved so that the
# machine's drift hits them alike; the file is dropped from the page cache before each run.
for pct in ${PCTS:-25 50 75}; do
    for mode in ${MODES:-none all}; do
        dd if="$model" iflag=nocache count=0 2>/dev/null
        echo "== cache ${pct}% (0 = resident), prefetch $mode at $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "dd iflag=direct: $(dd_rate)"
        HALO_STREAM_PREFETCH=$mode HALO_STREAM_TRACE=${TRACE_DIR:+$TRACE_DIR/trace$pct.txt} \
            build/bench/bench_stream "$model" "$pct" "$pp" "$tg" "$threads"
    done
done
