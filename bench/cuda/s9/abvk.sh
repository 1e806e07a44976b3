#!/bin/bash
# Session 9 final call 2's A/B (the helpers' FINAL-AB.md runs): on the 24-layer q2 GGUF, tg64
# -r 2 with the defaults, each candidate switch on top of them, and the defaults again (the
# first and last rows bracket the drift).
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
h=build-vk-dev/src/cli/halo
s="-m /dev/shm/halo-dsv4-q2-24.gguf --backend vulkan -p 0 -n 64 -r 2"
for x in X=1 HALO_VK_MVQ8S=auto HALO_VK_MOE_DEC=512 HALO_VK_MOE_DEC=1024 X=2; do
  echo "== $x"
  timeout 40 env HALO_VK_PROFILE=2 $x $h bench $s 2>&1 | grep -E "tg64|GPU busy"
done
