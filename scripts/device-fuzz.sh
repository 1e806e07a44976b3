#!/usr/bin/env bash
# Runs a libFuzzer target built on a Debian machine (`make fuzz`) on the GPU machine's CPU cores,
# which sit idle while GPU tests and benchmarks run there: that machine has no clang, so the
# binary travels xz-compressed with the Debian runtime libraries it links (docs/fuzzing.md).
#
#   scripts/device-fuzz.sh BINARY.xz JOBS SECONDS WORK_DIR LOG [fuzzer flags...]
#
# DEBS (default .carry/cuda/debs) and EXTRA_DEBS (liburing2, default .carry/fuzz) hold the .deb
# files. The corpus directories come last among the flags, as libFuzzer wants them.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 jobs=$2 secs=$3 work=$4 log=$5
shift 5
prefix=/tmp/halo-fuzz-prefix
mkdir -p "$prefix" "$work"
for f in "${DEBS:-.carry/cuda/debs}"/*.deb "${EXTRA_DEBS:-.carry/fuzz}"/*.deb; do
    dpkg -x "$f" "$prefix"
done
exe=/tmp/$(basename "$bin" .xz)
xz -dc "$bin" >"$exe" && chmod +x "$exe"
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
mkdir -p /dev/shm/halo-fuzz
TMPDIR=/dev/shm/halo-fuzz "$exe" -fork="$jobs" -max_total_time="$secs" -ignore_crashes=1 \
    -ignore_timeouts=1 -artifact_prefix="$work/" "$@" >"$log" 2>&1 || true
grep -E "^#[0-9]+:" "$log" | tail -1
ls "$work" | grep -E "^(crash|timeout|oom|leak)-" || echo "device-fuzz: no crash artifact"
