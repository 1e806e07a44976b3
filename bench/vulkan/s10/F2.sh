#!/bin/bash
# Session 10 final call 2 (same machine, right after F1): halo Vulkan against llama.cpp v0.5.0
# Vulkan (built on the device in call 2, bench/vulkan/s10/build_llama_vk.sh) on the 24-layer q2
# GGUF F1 wrote: pp512, pp2048, tg64 at depth 0, two alternating rounds (bench/vulkan/run.sh).
# Carry .carry/llvk and .carry/vulkan, with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f2; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/f2.tgz -C $W .; }
m=/dev/shm/halo-dsv4-q2-24.gguf
[ -x build-vk-dev/src/cli/halo ] && [ -f $m ] || { echo "no build-vk-dev or no $m: F1's machine was not kept"; exit 1; }
for f in .carry/vulkan/debs/root/*.deb; do dpkg -x $f /; done; ldconfig
xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
touch /tmp/halo-vk-prefix/.bench-ready
LLAMA_BENCH=/tmp/llama-bench-vk DEPTH=0 PROMPTS=512,2048 REPS=${REPS:-2} ROUNDS=${ROUNDS:-2} OUT=$W/vk \
  timeout ${BENCH_S:-330} bash bench/vulkan/run.sh $m > $W/vk-bench.log 2>&1
echo "vk bench rc=$?"; grep -E "^\||round|rror|ggml_vulkan: 0" $W/vk-bench.log $W/vk/llamacpp-vulkan.err 2>/dev/null | tail -16; el "vulkan bench"; save
