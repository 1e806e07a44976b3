#!/bin/bash
# Session 10 call 3: halo built; the 8-layer tg64 A/B by medians (tgj.sh) of the helpers' int8
# paths (HALO_VK_MOEQ, now on by default, off; HALO_VK_MVQ8I on), submission sizes on top of both, and
# precise ablations (HALO_VK_SKIP: wrong results, timing only) of dispatches that share a level
# with others; then the helpers' requests (dispatch.sh) if any.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; export W=/tmp/c3; mkdir -p $W
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
CTEST_REGEX=vulkan_hazard OUT=$W timeout 100 scripts/device-vulkan.sh .carry/vulkan/debs > $W/build.log 2>&1
echo "build rc=$?"; grep -E "built in|tests passed" $W/build.log; el built
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
a="--synthetic dsv4-flash-q2:8 --backend vulkan --weights device -p 0 -n 64 -r 6"
B="HALO_VK_MVQ8I=1"
{
bash bench/vulkan/s10/tgj.sh base "X=1" $a
bash bench/vulkan/s10/tgj.sh nomoeq "HALO_VK_MOEQ=0" $a
bash bench/vulkan/s10/tgj.sh both "$B" $a
bash bench/vulkan/s10/tgj.sh both_max1024 "$B HALO_VK_MAX_DISPATCH=1024" $a
bash bench/vulkan/s10/tgj.sh skip_wide "$B HALO_VK_SKIP=matmul_multi/matvec_wide" $a
bash bench/vulkan/s10/tgj.sh skip_copy "$B HALO_VK_SKIP=copy" $a
bash bench/vulkan/s10/tgj.sh both2 "$B" $a
} 2>&1 | tee $out/ab.txt
el "A/B done"
HALO_VK_MVQ8I=1 HALO_VK_PROFILE=1 timeout 20 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:4 \
  --backend vulkan --weights device -p 0 -n 32 -r 1 > /dev/null 2> $W/prof4.err
grep "vulkan profile: " $W/prof4.err | tail -30 > $out/prof4-both.txt; head -14 $out/prof4-both.txt | cut -c17-150
el "profile done"
if ls .carry/queue/*/run.sh > /dev/null 2>&1; then OUT=$out timeout ${QUEUE_S:-300} bash .carry/lead/dispatch.sh; fi
tar czf $out/c3.tgz -C $W . 2>/dev/null
el done
