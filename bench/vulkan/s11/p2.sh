#!/bin/bash
# Session 11 call 2: the radix top-k select and topk_score_row.comp at depth. halo Vulkan built;
# the 8-layer synthetic q2 model, tg32 at depth 24,576 with HALO_VK_PROFILE=3 (defaults), then
# with HALO_VK_SCORE_ROW=0 (the old score kernel; fill time shows prefill's side), then depth 0.
# Carry .carry/vulkan (slim.sh bench).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; W=/tmp/p2; mkdir -p $W
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
CTEST_REGEX=vulkan_placement OUT=$W timeout 150 scripts/device-vulkan.sh .carry/vulkan/debs > $W/halo-build.txt 2>&1
echo "halo build rc=$?"; grep -E "built in|tests passed|failed" $W/halo-build.txt | head; el built
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
h=build-vk-dev/src/cli/halo
run() { # NAME DEPTH PROFILE "ENV" TIMEOUT
  local t=$(date +%s)
  timeout $5 env HALO_VK_PROFILE=$3 $4 $h bench --synthetic dsv4-flash-q2:8 --backend vulkan \
    --weights device -p 0 -n 32 -d $2 -r 3 -o json > $W/$1.json 2> $W/$1.err
  local rc=$?
  echo "$1 d=$2 env='$4' rc=$rc ($(( $(date +%s) - t )) s) tg32 samples: $(grep -o '"samples_ts": \[[^]]*\]' $W/$1.json)" | tee -a $out/p2.txt
  grep "1:" $W/$1.err | head -12 >> $out/p2.txt
  grep "GPU busy" $W/$1.err | tail -1 >> $out/p2.txt
  cp $W/$1.err $out/$1.err 2>/dev/null
}
run prof24k 24576 3 "" 150
run oldscore24k 24576 2 "HALO_VK_SCORE_ROW=0" 150
run d0 0 2 "" 60
el done
