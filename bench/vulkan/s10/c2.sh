#!/bin/bash
# Session 10 call 2: llama.cpp Vulkan build retried in the background; halo built; tests of the
# new paths on the H200 (hazard; ops filtered to the hc tests, which take hc_pre's subgroup
# Sinkhorn here (lavapipe's subgroups are too narrow); golden does not fit this call's upload
# beside the carried sources); the 8-layer tg64 A/B of copy.comp and hc_mix's vec4 path (median of
# repetitions 2..6); the 4-layer stamps; helper requests (dispatch.sh) if any.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; export W=/tmp/c2; mkdir -p $W
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
(bash bench/vulkan/s10/build_llama_vk.sh > $W/llama-build.txt 2>&1) &
lb=$!
HALO_VK_TEST_ONLY=hyper,hc_post CTEST_REGEX="vulkan_(hazard|ops)" OUT=$W timeout 120 \
  scripts/device-vulkan.sh .carry/vulkan/debs > $W/tests.log 2>&1
echo "tests rc=$?"; grep -E "built in|Passed|Failed|tests passed|FAIL|Sinkhorn|hc_pre" $W/tests.log | head -20; el tests
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
a="--synthetic dsv4-flash-q2:8 --backend vulkan --weights device -p 0 -n 64 -r 6"
for r in 1 2; do
  bash bench/vulkan/s10/tgj.sh new$r "X=1" $a
  bash bench/vulkan/s10/tgj.sh cmdcopy$r "HALO_VK_COPY_SHADER=0" $a
  bash bench/vulkan/s10/tgj.sh hcscalar$r "HALO_VK_HC_VEC=0" $a
  bash bench/vulkan/s10/tgj.sh old$r "HALO_VK_COPY_SHADER=0 HALO_VK_HC_VEC=0" $a
done | tee $out/ab.txt
el "A/B done"
HALO_VK_PROFILE=1 timeout 20 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:4 --backend vulkan \
  --weights device -p 0 -n 32 -r 1 > /dev/null 2> $W/prof4.err
grep "vulkan profile: " $W/prof4.err | tail -28 > $out/prof4.txt; grep -E "hc_|copy" $out/prof4.txt | cut -c17-150
el "profile done"
if ls .carry/queue/*/run.sh > /dev/null 2>&1; then OUT=$out timeout ${QUEUE_S:-300} bash .carry/lead/dispatch.sh; fi
wait $lb; tail -3 $W/llama-build.txt; el "llama build done"
b=/tmp/llama-vk/build/bin/llama-bench
if [ -x $b ]; then xz -T8 -c $b > $out/llama-bench.xz; ls -la $out/llama-bench.xz; ldd $b | grep -v "linux-vdso\|ld-linux" | head; fi
tail -30 /tmp/llama-vk.log > $W/llama-vk-log-tail.txt
tar czf $out/c2.tgz -C $W . 2>/dev/null
el done
