#!/bin/bash
# Session 10 final call B (same machine, right after FA.sh, which left build-vk-dev and the GGUF):
# halo Vulkan against llama.cpp v0.5.0 Vulkan (built on the device in call 2,
# build_llama_vk.sh) on that file at depth 0: pp512, pp2048, tg64 (bench/vulkan/run.sh).
# Carry .carry/vulkan and .carry/llvk with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/fb; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/fb.tgz -C $W .; }
m=/dev/shm/halo-dsv4-q2-24.gguf
[ -x build-vk-dev/src/cli/halo ] && [ -f $m ] || { echo "no build-vk-dev or no $m: FA's machine was not kept"; exit 1; }
for f in .carry/vulkan/debs/root/*.deb; do dpkg -x $f /; done; ldconfig
touch /tmp/halo-vk-prefix/.bench-ready
xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
LLAMA_BENCH=/tmp/llama-bench-vk DEPTH=0 PROMPTS=512,2048 REPS=${REPS:-2} ROUNDS=${ROUNDS:-1} OUT=$W/vk \
  timeout ${BENCH_S:-200} bash bench/vulkan/run.sh $m > $W/vk-bench.log 2>&1
echo "vk bench rc=$?"; grep -E "^\||round|rror|ggml_vulkan: 0" $W/vk-bench.log $W/vk/llamacpp-vulkan.err 2>/dev/null | tail -16; el "vulkan bench"; save
