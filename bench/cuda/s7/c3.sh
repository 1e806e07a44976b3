#!/bin/bash
# Session 7, call 3 (lead, the device time left): test_backend_cuda_graphs_ahead again after its
# ctest entry got the repository root as working directory (final call 1: it could not open
# models/kjv-tiny.gguf), then the experts' GUFUSE A/B once more at 4 layers and at 43.
set -u; t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs
timeout 80 scripts/device-setup.sh .carry/cuda/debs > /tmp/setup.log 2>&1 || tail /tmp/setup.log
source build-gpu/env.sh; el built
(cd build-gpu && timeout 40 ctest --output-on-failure -R "graphs") 2>&1 | grep -E "Passed|Failed|FAIL|ok  |differ" | head; el graphs
H=build-gpu/src/cli/halo
for v in X=1 HALO_CUDA_GUFUSE=2 X=2 HALO_CUDA_GUFUSE=2; do
  echo "== $v: $(env $v timeout 6 $H bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device \
    -p 0 -n 64 -r 5 -o md 2>&1 | grep -E '^\| deep' | awk -F'|' '{printf "%s ", $(NF-3)}')"; done; el ab4
echo "== 43L GUFUSE=2: $(HALO_CUDA_GUFUSE=2 timeout 38 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device -p 0 -n 64 -r 1 -o md 2>&1 | grep -E '^\| deep' | sed 's/  */ /g')"; el done
