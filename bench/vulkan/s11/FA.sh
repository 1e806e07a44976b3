#!/bin/bash
# Session 11 final call A: halo built with Vulkan; every Vulkan test on the H200 (ctest -j 4 -R
# vulkan, the golden fixtures included: HALO_VK_TEST_ALL=1) while the 24-layer q2 GGUF is written
# to /dev/shm; then tg64 at depth 24,576 on it, llama.cpp v0.5.0 Vulkan and halo Vulkan
# (s10/F3.sh). FB.sh follows on the same machine (depth 0). Carry .carry/vulkan and .carry/llvk
# with bench/cuda/s7/slim.sh golden (the tree without the tokenizer fixtures, fuzz corpora and the
# embedded model's GGUF: under the 64 MiB upload with both carries).
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/fa; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/fa.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -f /dev/shm/halo-*.gguf*; m=/dev/shm/halo-dsv4-q2-24.gguf
CTEST_REGEX=vulkan_placement HALO_VK_TEST_ALL=0 OUT=$W/b timeout 150 scripts/device-vulkan.sh .carry/vulkan/debs > $W/build.log 2>&1
echo "build rc=$?"; grep -E "built in|tests passed" $W/build.log; el built
touch /tmp/halo-vk-prefix/.bench-ready
export LD_LIBRARY_PATH=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
(timeout 250 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:24 --write-gguf $m.part \
  > $W/write.log 2>&1 && mv $m.part $m; echo "write rc=$?" >> $W/write.log) &
(cd build-vk-dev && HALO_VK_TEST_ALL=1 timeout -k 5 ${TEST_S:-330} ctest -j 4 --output-on-failure -R "${TEST_RE:-vulkan}") > $W/vk-tests.log 2>&1
echo "tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|Not Run|FAIL" $W/vk-tests.log | tail -16; el "vulkan tests"; save
cp $W/vk-tests.log $out/vk-tests.log
wait; tail -2 $W/write.log; ls -la $m; el "24L written"; save
[ -f $m ] || exit 1
for f in .carry/vulkan/debs/root/*.deb; do dpkg -x $f /; done; ldconfig
LL_S=${LL_S:-100} HALO_S=${HALO_S:-150} bash bench/vulkan/s10/F3.sh > $W/f3.log 2>&1; cat $W/f3.log | tail -6
cp /tmp/f3/*-d.csv /tmp/f3/*-d.err $out/ 2>/dev/null; el "depth 24,576"; save
