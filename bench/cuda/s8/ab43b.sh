#!/bin/bash
# Session 8, call 3: the 43-layer A/Bs F1 could not run (after its 24L GGUF filled /dev/shm the
# 43-layer processes stopped within seconds; errors not kept). Nothing else on the machine.
set -u; t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
rm -f /dev/shm/halo-* ; free -g | head -2
mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs
[ -x build-gpu/src/cli/halo ] || timeout 90 scripts/device-setup.sh .carry/cuda/debs > /tmp/setup.log 2>&1 || tail -5 /tmp/setup.log
source build-gpu/env.sh; H=build-gpu/src/cli/halo; el built
for v in HALO_CUDA_ROUTERANK=0 HALO_CUDA_MDQ=0 HALO_CUDA_PINREAD=0; do
  echo "== $v: $(env $v HALO_CUDA_GRAPH_STATS=1 timeout 40 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device \
    -p 0 -n 64 -r 1 -o md 2>&1 | grep -E '^\| deep|host us|rror|efus' | sed 's/  */ /g' | cut -c1-300)"; el "$v"; done
