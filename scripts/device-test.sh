#!/usr/bin/env bash
# On the GPU machine: build halo with CUDA (scripts/device-setup.sh) and run the GPU tests,
# logs under $OUT (the device tool's output folder) or /tmp/halo-out.
#   scripts/device-test.sh [CTEST_REGEX]   default: the GPU tests (names with cuda or gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/halo-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
start=$(date +%s)
scripts/device-setup.sh "${DEBS:-.carry/cuda/debs}" 2>&1 | tee "$out/setup.log"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
echo "setup took $(($(date +%s) - start)) s"
source build-gpu/env.sh
cd build-gpu
ctest --output-on-failure -j "${JOBS:-4}" -R "${1:-cuda|gpu}" 2>&1 | tee "$out/ctest.log"
rc=${PIPESTATUS[0]}
cp Testing/Temporary/LastTest.log "$out/LastTest.log" 2>/dev/null
exit "$rc"
