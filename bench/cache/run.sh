#!/usr/bin/env bash
# Continuing a 4,096-token conversation after an edit of its last 200 tokens, with and without
# checkpoints and the prefix cache, and session save/load against the disk's own speed.
# Not a test: speed claims come from here (bench/cache/RESULTS.md).
#
#   bench/cache/run.sh [MODEL.gguf] [THREADS] [N_TOKENS] [EDIT]
#
# MODEL defaults to the medium synthetic model (bench/cpu/make_medium.c, 8.85 GiB) under
# /tmp/kvcache-bench, written there first if missing. Never commit it.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=/tmp/kvcache-bench
model=${1:-$dir/medium.gguf}
threads=${2:-$(nproc)}
n=${3:-4096}
edit=${4:-200}
mkdir -p "$dir"
cmake -S . -B build >/dev/null && cmake --build build --target bench_cache bench_make_medium >/dev/null
[ -f "$model" ] || build/bench/bench_make_medium "$model" 4

# The disk's own speed on the same directory: 1 GiB written with fsync, read back with the
# page cache bypassed.
dd if=/dev/zero of="$dir/dd.bin" bs=16M count=64 conv=fsync 2>&1 | tail -1 | sed 's/^/disk write: /'
dd if="$dir/dd.bin" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1 | sed 's/^/disk read:  /'
rm -f "$dir/dd.bin"
rm -rf "$dir/kv" "$dir/bench-session.halokv"
build/bench/bench_cache "$model" "$n" "$edit" "$threads" "$dir"
