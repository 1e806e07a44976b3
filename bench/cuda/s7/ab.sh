#!/bin/bash
# Session 7 final call 2's A/B runs (the helpers' FINAL-AB.md, trimmed to the device time left).
set -u; source build-gpu/env.sh; H=build-gpu/src/cli/halo
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
# cuda-moe, run 1: 4-layer tg64, each switch against the default, alternating
for v in X=1 HALO_CUDA_GUFUSE=1 HALO_CUDA_GUFUSE=2 HALO_CUDA_DNHOLD=1 HALO_CUDA_DNHOLD=2 \
         "HALO_CUDA_GUFUSE=2 HALO_CUDA_DNHOLD=2" HALO_CUDA_ROUTEFUSE=1 X=2; do
  echo "== moe $v"; env HALO_CUDA_GRAPH_STATS=1 $v timeout 8 $H bench --synthetic dsv4-flash-q2:4 \
    --backend cuda --weights device -p 0 -n 64 -r 5 -o md 2>&1 | grep -E "^\| deep|graphs:"
done; el moe
# vulkan, run 1: every barrier naming the host, as before session 7, against run.sh's default rows
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
s='--synthetic dsv4-flash-q2:24 --weights device --backend vulkan -p 0 -n 64 -r 2'
for v in X=1 HALO_VK_BARRIER_HOST=1; do echo "== vk $v"
  timeout 40 env HALO_VK_PROFILE=2 $v build-vk-dev/src/cli/halo bench $s 2>&1 | grep -E "tg64|GPU busy"; done; el vk
