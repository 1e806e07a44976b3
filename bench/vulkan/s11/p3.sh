#!/bin/bash
# Session 11 call 3: the merged grouped MoE products (moe_mm), split-K decode attention and radix
# top-k on the H200. halo Vulkan built; the new ops' tests; the 8-layer synthetic q2 model:
# pp512 with and without HALO_VK_MOE_MM, tg32 at depth 24,576 with HALO_VK_PROFILE=3 and with
# HALO_VK_ATTN_SPLIT=0. Carry .carry/vulkan (slim.sh bench).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; W=/tmp/p3; mkdir -p $W
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
CTEST_REGEX=vulkan_placement OUT=$W timeout 150 scripts/device-vulkan.sh .carry/vulkan/debs > $W/halo-build.txt 2>&1
echo "halo build rc=$?"; grep -E "built in|tests passed|failed" $W/halo-build.txt | head; el built
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
HALO_VK_TEST_ONLY=attention,indexer,moe_prefill,moe_routes timeout 120 build-vk-dev/tests/backend/test_backend_vulkan_ops > $W/ops.txt 2>&1
echo "ops subset rc=$?"; grep -vE "^(cvt|matvec|defaults)" $W/ops.txt | tail -40 > $out/p3-ops.txt; tail -1 $W/ops.txt; el ops
h=build-vk-dev/src/cli/halo
run() { # NAME ARGS PROFILE "ENV" TIMEOUT
  local t=$(date +%s)
  timeout $5 env HALO_VK_PROFILE=$3 $4 $h bench --synthetic dsv4-flash-q2:8 --backend vulkan \
    --weights device $2 -r 3 -o json > $W/$1.json 2> $W/$1.err
  local rc=$?
  echo "$1 [$2] env='$4' rc=$rc ($(( $(date +%s) - t )) s) samples: $(grep -o '"samples_ts": \[[^]]*\]' $W/$1.json | tr '\n' ' ')" | tee -a $out/p3.txt
  grep -E "1:|vulkan profile: (moe|attention|matmul|topk)" $W/$1.err | head -14 >> $out/p3.txt
  grep "GPU busy" $W/$1.err | tail -1 >> $out/p3.txt
}
run pp_mm "-p 512 -n 0" 2 "" 60
run pp_nomm "-p 512 -n 0" 2 "HALO_VK_MOE_MM=0" 60
run pp_prof "-p 512 -n 0" 1 "" 60
run d24k "-p 0 -n 32 -d 24576" 3 "" 150
run d24k_nosplit "-p 0 -n 32 -d 24576" 2 "HALO_VK_ATTN_SPLIT=0" 150
el done
