#!/usr/bin/env bash
# On the GPU machine after scripts/device-test.sh: the existing end-to-end suites on the GPU
# backend (HALO_BACKEND=cuda), and what `halo plan` prints there for the full-size model
# (a sparse GGUF of DeepSeek V4 Flash's real tensor table). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../build-gpu"
out=${OUT:-/tmp/halo-out}
source env.sh
HALO_BACKEND=cuda ctest --output-on-failure -j 4 -R "${1:-embedded|forward_quant|cli_run|cli_logits}" \
    >"$out/halo_backend_cuda.log" 2>&1
grep -E "tests passed|Passed|Failed|\*\*\*" "$out/halo_backend_cuda.log"
tests/common/write_dsv4_flash /tmp/dsv4-q2.gguf q2
for w in auto device host; do
    echo "== halo plan --backend cuda --weights $w"
    src/cli/halo plan -m /tmp/dsv4-q2.gguf --backend cuda --weights $w --ctx 65536
done >"$out/plan_h200.txt" 2>&1
head -60 "$out/plan_h200.txt"
