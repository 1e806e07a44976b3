#!/bin/bash
# Session 13 call F2: what single steps of a decode layer's dependency chain cost on the H200.
# halo Vulkan built, the 24-layer q2 GGUF written, then tg64 (-r 4, median of repetitions 2-4,
# s10/tgj.sh) with the default barriers and with the barrier before one kind of command left
# out (HALO_VK_NO_BARRIER, wrong results, timing only): attention (after the window's gathered
# copy), the routing (after the router), hc_pre (after hc_mix), then all three.
# Carry .carry/vulkan with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f2; rm -rf $W; mkdir -p $W $out
. bench/vulkan/s12/common.sh
build_write $W
# (run names without slashes: tgj.sh makes files of them; the first run of this script named them
# by the label and only the default runs came back)
i=0
for c in "" attention/ moe/moe_route hc_pre/hc_pre attention/,moe/moe_route,hc_pre/hc_pre ""; do
  i=$((i + 1))
  W=$W TGJ_TIMEOUT=90 bash bench/vulkan/s10/tgj.sh "nb$i" "HALO_VK_NO_BARRIER=$c" -m $m --backend vulkan -p 0 -n 64 -r 4
done | tee $out/no-barrier.txt
el done
