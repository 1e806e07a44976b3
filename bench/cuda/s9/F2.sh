#!/bin/bash
# Session 9 final call 2 (same machine, right after F1): halo Vulkan against llama.cpp v0.5.0
# Vulkan on the 24-layer q2 GGUF F1 wrote (pp512, pp2048, tg64 at depth 0; two alternating
# rounds), halo CUDA on the same file from the same tree, then the helpers' FINAL-AB runs
# (bench/cuda/s9/abvk.sh). Carry .carry/llvk, with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f2; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/f2.tgz -C $W .; }
m=/dev/shm/halo-dsv4-q2-24.gguf
[ -x build-vk-dev/src/cli/halo ] && [ -f $m ] || { echo "no build-vk-dev or no $m: F1's machine was not kept"; exit 1; }
xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
LLAMA_BENCH=/tmp/llama-bench-vk DEPTH=0 PROMPTS=512,2048 REPS=2 ROUNDS=2 OUT=$W/vk timeout 260 \
  bash bench/vulkan/run.sh $m > $W/vk-bench.log 2>&1
echo "vk bench rc=$?"; grep -E "^\||round|rror" $W/vk-bench.log | tail -14; el "vulkan bench"; save
source build-gpu/env.sh
timeout 60 build-gpu/src/cli/halo bench -m $m --backend cuda --weights device -p 512,2048 -n 64 \
  -r 2 -o md > $W/cuda24.md 2>&1; grep -E "^\| deep" $W/cuda24.md | sed 's/  */ /g'; el "cuda 24L"; save
{ timeout 170 bash bench/cuda/s9/abvk.sh > $W/abvk.txt 2>&1
  grep -E "^==|tg64|GPU busy|rc=" $W/abvk.txt | sed -E "s/ +/ /g" | cut -c1-200; el "vk A/B"; save; }
