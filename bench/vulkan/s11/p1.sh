#!/bin/bash
# Session 11 call 1: where decode time goes at depth. (a) llama.cpp v0.5.0 Vulkan llama-bench built
# in the background (s10/build_llama_vk.sh), brought back xz-compressed; (b) halo Vulkan built;
# (c) the 8-layer synthetic q2 model at depth 24,576 and 8,192, tg32, HALO_VK_PROFILE=3 (each
# dispatch stamped, the decode steps' labels apart with "1:"); (d) at 24,576 an ablation
# (HALO_VK_SKIP, wrong results, timing only) without the indexer's select, then without attention.
# Carry .carry/vulkan, .carry/llsrc (slim.sh bench).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; W=/tmp/p1; mkdir -p $W
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
(bash bench/vulkan/s10/build_llama_vk.sh > $W/llama-build.txt 2>&1) &
lb=$!
CTEST_REGEX=vulkan_placement OUT=$W timeout 150 scripts/device-vulkan.sh .carry/vulkan/debs > $W/halo-build.txt 2>&1
echo "halo build rc=$?"; grep -E "built in|tests passed|failed" $W/halo-build.txt | head; el built
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
h=build-vk-dev/src/cli/halo
run() { # NAME DEPTH PROFILE SKIP TIMEOUT
  local t=$(date +%s)
  timeout $5 env HALO_VK_PROFILE=$3 HALO_VK_SKIP="$4" $h bench --synthetic dsv4-flash-q2:8 --backend vulkan \
    --weights device -p 0 -n 32 -d $2 -r 3 > $W/$1.md 2> $W/$1.err
  local rc=$? v=$(grep -E "tg32" $W/$1.md | awk -F'|' '{print $(NF-1)}')
  echo "$1 d=$2 skip='$4' rc=$rc tg32 $v ($(( $(date +%s) - t )) s)" | tee -a $out/p1.txt
  grep "1:" $W/$1.err | head -30 >> $out/p1.txt
  grep "GPU busy" $W/$1.err | tail -2 >> $out/p1.txt
  cp $W/$1.err $out/$1.err 2>/dev/null
}
run prof24k 24576 3 "" 150
el prof24k
run prof8k 8192 3 "" 60
el prof8k
run nosel24k 24576 2 "topk/topk_select" 120
run noatt24k 24576 2 "attention/attention" 120
el ablation
wait $lb; tail -3 $W/llama-build.txt; el "llama build done"
b=/tmp/llama-vk/build/bin/llama-bench
if [ -x $b ]; then xz -T8 -c $b > $out/llama-bench.xz; ls -la $out/llama-bench.xz; fi
