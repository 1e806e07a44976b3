#!/bin/bash
# Session 6 final call 1b (same machine, right after call 1): halo Vulkan vs llama.cpp v0.5.0
# Vulkan on the 24-layer q2 GGUF, two alternating rounds, and the session-6-off A/B.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f1b; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
m=/dev/shm/halo-dsv4-q2-24.gguf
if [ -x build-vk-dev/src/cli/halo ] && [ -f $m ]; then
  xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
  LLAMA_BENCH=/tmp/llama-bench-vk DEPTH=0 PROMPTS=512 REPS=2 ROUNDS=2 OUT=$W/vk timeout 260 bash bench/vulkan/run.sh $m > $W/vk-bench.log 2>&1
  echo "vk bench rc=$?"; tail -14 $W/vk-bench.log; el "vulkan bench"
  [ -f .carry/lead/ab-vk.sh ] && { timeout 60 bash .carry/lead/ab-vk.sh > $W/ab-vk.txt 2>&1; tail -8 $W/ab-vk.txt; el "vulkan A/B"; }
else echo "no build-vk-dev or no $m: call 1's machine was not kept"; fi
rm -f $m
tar czf $out/f1b.tgz -C $W .
