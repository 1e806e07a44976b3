#!/bin/bash
# Session 10 final call 3 (same machine, right after F2): depth 24,576 on the same GGUF: tg64 and
# pp2048 for llama.cpp v0.5.0 Vulkan, then halo Vulkan (-r 1; the fill is not timed).
# Carry .carry/llvk and .carry/vulkan, with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f3; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/f3.tgz -C $W .; }
m=/dev/shm/halo-dsv4-q2-24.gguf
[ -x build-vk-dev/src/cli/halo ] && [ -f $m ] || { echo "no build-vk-dev or no $m"; exit 1; }
[ -x /tmp/llama-bench-vk ] || { xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk; }
export LD_LIBRARY_PATH=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
P=${DEPTH_P:-0}
timeout ${LL_S:-150} /tmp/llama-bench-vk -m $m -ngl 99 -p $P -n 64 -d 24576 -r 1 -o csv > $W/llamacpp-vulkan-d.csv 2> $W/llamacpp-vulkan-d.err
echo "llama rc=$?"; el "llama.cpp vulkan depth"; save
timeout ${HALO_S:-300} build-vk-dev/src/cli/halo bench -m $m --backend vulkan -p $P -n 64 -d 24576 -r 1 -o csv > $W/halo-vulkan-d.csv 2> $W/halo-vulkan-d.err
echo "halo vk rc=$?"; el "halo vulkan depth"; save
for f in $W/*-d.csv; do echo "== $(basename $f)"; cut -d, -f15-17,21-24 $f; done
