#!/bin/bash
# Session 8 final call 1's 43-layer A/B runs (the helpers' FINAL-AB: bench/cuda/s8/final-ab-*.md),
# tg64 each, right after the call's headline (defaults).
set -u; source build-gpu/env.sh; H=build-gpu/src/cli/halo
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
b43() { echo "== $1: $(env $1 timeout 40 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device \
  -p 0 -n 64 -r 1 -o md 2>&1 | grep -E "^\| deep|host us" | sed 's/  */ /g')"; el "$1"; }
b43 HALO_CUDA_MDQ=0          # cuda-moe run 1: the generic expert streams (session 7's path)
b43 "HALO_CUDA_ROUTERANK=0 HALO_CUDA_GRAPH_STATS=1"   # cuda-dense run 1: route1's arg-max rounds
b43 "HALO_CUDA_PINREAD=0 HALO_CUDA_GRAPH_STATS=1"     # cuda-dense run 2: pageable logits read
