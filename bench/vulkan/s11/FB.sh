#!/bin/bash
# Session 11 final call B (the same machine, right after FA.sh, which left build-vk-dev and the
# 24-layer GGUF; rebuilt and rewritten when the machine was not kept): halo Vulkan against
# llama.cpp v0.5.0 Vulkan on that file: pp512, pp2048, tg64 at depth 0 (bench/vulkan/run.sh);
# with ABLATE=1 then halo's ablations: pp512 with HALO_VK_MMQ8T=0 and with HALO_VK_MOE_MM=0,
# tg64 at depth 24,576 with HALO_VK_ATTN_SPLIT=0 (the fill again).
# Carry .carry/vulkan and .carry/llvk with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/fb; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/fb.tgz -C $W .; }
m=/dev/shm/halo-dsv4-q2-24.gguf
export LD_LIBRARY_PATH=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [ ! -x build-vk-dev/src/cli/halo ] || [ ! -f $m ]; then
  echo "machine not kept: rebuilding and writing the GGUF"
  CTEST_REGEX=vulkan_placement OUT=$W/b timeout 150 scripts/device-vulkan.sh .carry/vulkan/debs > $W/build.log 2>&1
  timeout 250 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:24 --write-gguf $m.part > $W/write.log 2>&1 && mv $m.part $m
  el "rebuilt and written"
fi
for f in .carry/vulkan/debs/root/*.deb; do dpkg -x $f /; done; ldconfig
touch /tmp/halo-vk-prefix/.bench-ready
xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
LLAMA_BENCH=/tmp/llama-bench-vk DEPTH=0 PROMPTS=512,2048 REPS=2 ROUNDS=1 OUT=$W/vk \
  timeout 200 bash bench/vulkan/run.sh $m > $W/vk-bench.log 2>&1
echo "vk bench rc=$?"; grep -E "^\||round|rror|ggml_vulkan: 0" $W/vk-bench.log $W/vk/llamacpp-vulkan.err 2>/dev/null | tail -16; el "depth-0 bench"; save
[ -n "${ABLATE:-}" ] || exit 0
h=build-vk-dev/src/cli/halo
for v in HALO_VK_MMQ8T=0 HALO_VK_MOE_MM=0; do
  timeout 60 env $v $h bench -m $m --backend vulkan -p 512 -n 0 -r 2 -o csv > $W/abl-$v.csv 2> $W/abl-$v.err
  echo "$v rc=$? $(cut -d, -f15-17,21-24 $W/abl-$v.csv | tail -1)"
done
timeout 120 env HALO_VK_ATTN_SPLIT=0 $h bench -m $m --backend vulkan -p 0 -n 64 -d 24576 -r 1 -o csv > $W/abl-split0.csv 2> $W/abl-split0.err
echo "HALO_VK_ATTN_SPLIT=0 d24576 rc=$? $(cut -d, -f15-17,21-24 $W/abl-split0.csv | tail -1)"
el ablations; save
