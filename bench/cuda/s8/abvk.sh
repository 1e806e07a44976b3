#!/bin/bash
# The vulkan helper's FINAL-AB (bench/vulkan/final-ab-s8.md), runs 1 and 2, on call 2's 24L GGUF.
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
h=build-vk-dev/src/cli/halo
m=/dev/shm/halo-dsv4-q2-24.gguf
if [ -f $m ]; then s="-m $m"; else s="--synthetic dsv4-flash-q2:24 --weights device"; fi
s="$s --backend vulkan -p 0 -n 64 -r 2"
echo "== vk HALO_VK_WEIGHT_MEM=mapped"
timeout 40 env HALO_VK_PROFILE=2 HALO_VK_WEIGHT_MEM=mapped $h bench $s 2>&1 | grep -E "tg64|GPU busy"
