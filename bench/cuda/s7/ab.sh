#!/bin/bash
# Session 7 final call 2's A/B runs (the helpers' FINAL-AB.md: bench/cuda/s7/final-ab-*.md,
# bench/vulkan/final-ab-s7.md), most important first, trimmed to the device time left.
set -u; source build-gpu/env.sh; H=build-gpu/src/cli/halo
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
# cuda-decode, run 1: 4-layer tg64 at depth 0 and 8192, the session's dense-path switches
for v in X=1 "HALO_CUDA_SCORENJ=0 HALO_CUDA_HC2ISSUE=0 HALO_CUDA_QBATCH=0 HALO_CUDA_POOLISSUE=0 HALO_CUDA_ATTSPLIT=0" \
         HALO_CUDA_SCORENJ=0 "HALO_CUDA_HC2ISSUE=0 HALO_CUDA_QBATCH=0 HALO_CUDA_POOLISSUE=0" HALO_CUDA_ATTSPLIT=0 X=2; do
  echo "== decode $v: $(env $v timeout 6 $H bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device \
    -p 0 -n 64 -d 0,8192 -r 3 -o md 2>&1 | grep -E '^\| deep' | awk -F'|' '{printf "%s ", $(NF-3)}')"
done; el decode
# cuda-moe, run 1 (trimmed): 4-layer tg64, the experts' switches against the default
for v in X=1 HALO_CUDA_GUFUSE=2 HALO_CUDA_DNHOLD=2 "HALO_CUDA_GUFUSE=2 HALO_CUDA_DNHOLD=2" HALO_CUDA_ROUTEFUSE=1 X=2; do
  echo "== moe $v: $(env $v timeout 6 $H bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device \
    -p 0 -n 64 -r 3 -o md 2>&1 | grep -E '^\| deep' | awk -F'|' '{printf "%s ", $(NF-3)}')"
done; el moe
# cuda-decode, run 2: 43-layer tg64 with every dense-path switch of the session off
echo "== decode 43L all off: $(HALO_CUDA_SCORENJ=0 HALO_CUDA_HC2ISSUE=0 HALO_CUDA_QBATCH=0 HALO_CUDA_POOLISSUE=0 HALO_CUDA_ATTSPLIT=0 \
  timeout 38 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device -p 0 -n 64 -r 1 -o md 2>&1 | grep -E '^\| deep' | sed 's/  */ /g')"; el decode43
# vulkan, run 1: every barrier naming the host, as before session 7 (against run.sh's rows)
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
s='--synthetic dsv4-flash-q2:24 --weights device --backend vulkan -p 0 -n 64 -r 2'
for v in HALO_VK_BARRIER_HOST=1 X=1; do echo "== vk $v"
  timeout 40 env HALO_VK_PROFILE=2 $v build-vk-dev/src/cli/halo bench $s 2>&1 | grep -E "tg64|GPU busy"; done; el vk
