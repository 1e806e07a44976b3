#!/bin/bash
# Session 11 call 4: matmul_q8t.comp on the H200. halo Vulkan built; test_backend_vulkan_intdot;
# the 8-layer synthetic q2 model: pp512 with HALO_VK_PROFILE=1, pp512 with and without
# HALO_VK_MMQ8T, tg32 at depth 24,576 with and without HALO_VK_ATTN_SPLIT (both HALO_VK_PROFILE=2).
# Carry .carry/vulkan (slim.sh bench).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; W=/tmp/p4; mkdir -p $W
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
CTEST_REGEX=vulkan_intdot OUT=$W timeout 150 scripts/device-vulkan.sh .carry/vulkan/debs > $W/halo-build.txt 2>&1
echo "halo build + intdot rc=$?"; grep -E "built in|tests passed|failed" $W/halo-build.txt | head; el built
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
h=build-vk-dev/src/cli/halo
run() { # NAME ARGS PROFILE "ENV" TIMEOUT
  local t=$(date +%s)
  timeout $5 env HALO_VK_PROFILE=$3 $4 $h bench --synthetic dsv4-flash-q2:8 --backend vulkan \
    --weights device $2 -r 3 -o json > $W/$1.json 2> $W/$1.err
  local rc=$?
  echo "$1 [$2] env='$4' rc=$rc ($(( $(date +%s) - t )) s) samples: $(grep -o '"samples_ts": \[[^]]*\]' $W/$1.json | tr '\n' ' ')" | tee -a $out/p4.txt
  grep -E "vulkan profile: " $W/$1.err | head -14 >> $out/p4.txt
  grep "GPU busy" $W/$1.err | tail -1 >> $out/p4.txt
}
run pp_prof "-p 512 -n 0" 1 "" 60
run pp_def "-p 512 -n 0" 2 "" 60
run pp_noq8t "-p 512 -n 0" 2 "HALO_VK_MMQ8T=0" 60
run d24k "-p 0 -n 32 -d 24576" 2 "" 150
run d24k_nosplit "-p 0 -n 32 -d 24576" 2 "HALO_VK_ATTN_SPLIT=0" 150
el done
