#!/bin/bash
# Session 13 call F: what the decode step's barriers cost on the H200. halo Vulkan built, the
# 24-layer q2 GGUF written to /dev/shm, then tg64 (-r 4, median of repetitions 2-4, s10/tgj.sh)
# with the default barriers (only between dependent commands), with none
# (HALO_VK_BARRIERS=none: wrong results, timing only) and with one before every command
# (HALO_VK_BARRIERS=all), two alternating rounds; each run's barrier count from
# HALO_VK_PROFILE=2. Carry .carry/vulkan with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f; rm -rf $W; mkdir -p $W $out
. bench/vulkan/s12/common.sh
build_write $W
for r in 1 2; do
  for c in default none all; do
    e=HALO_VK_BARRIERS=$c; [ $c = default ] && e=HALO_VK_BARRIERS=
    W=$W TGJ_TIMEOUT=90 bash bench/vulkan/s10/tgj.sh "$c-r$r" "$e" -m $m --backend vulkan -p 0 -n 64 -r 4
  done
done | tee $out/barriers.txt
el done
