#!/bin/bash
# Session 11 call 5: the Vulkan tests that read the embedded model (placement, split, engine:
# final call A's slimmed tree lacked models/kjv-tiny.gguf), and 8 layers tg64 at depth 0 with the
# split attention's new row threshold (default) against HALO_VK_ATTN_SPLIT=0. Carry
# .carry/vulkan (slim.sh bench).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; W=/tmp/p5; mkdir -p $W
CTEST_REGEX="vulkan_(placement|split|engine)" OUT=$W timeout 150 scripts/device-vulkan.sh .carry/vulkan/debs > $W/b.txt 2>&1
echo "build + tests rc=$?"; grep -E "built in|tests passed|Passed|Failed|FAIL" $W/b.txt | head; cp $W/b.txt $out/p5-tests.txt
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
for v in "HALO_VK_X=1" "HALO_VK_ATTN_SPLIT=0"; do
  timeout 40 env $v build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:8 --backend vulkan --weights device -p 0 -n 64 -r 4 -o json > $W/t.json 2>/dev/null
  echo "$v: $(grep -o '"samples_ts": \[[^]]*\]' $W/t.json)" | tee -a $out/p5.txt
done
