#!/bin/bash
# Session 8 final call 2 (same machine, right after call 1): halo Vulkan vs llama.cpp v0.5.0
# Vulkan on the 24-layer q2 GGUF (two alternating rounds), the vulkan helper's A/B runs on the
# same file (.carry/lead/abvk.sh), then the q2q4 and mxfp4 mixes at 43 layers if time is left.
# (halo CUDA vs llama.cpp CUDA on the 24-layer file, session 7's F2, did not fit this session's
# device time.)
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f2; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - t0) )); }
save() { tar czf $out/f2.tgz -C $W .; }
m=/dev/shm/halo-dsv4-q2-24.gguf
if [ -x build-vk-dev/src/cli/halo ] && [ -f $m ]; then
  xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
  LLAMA_BENCH=/tmp/llama-bench-vk DEPTH=0 PROMPTS=512 REPS=2 ROUNDS=2 OUT=$W/vk timeout 220 bash bench/vulkan/run.sh $m > $W/vk-bench.log 2>&1
  echo "vk bench rc=$?"; tail -14 $W/vk-bench.log; el "vulkan bench"; save
  [ -f .carry/lead/abvk.sh ] && { timeout 45 bash .carry/lead/abvk.sh > $W/abvk.txt 2>&1; grep -E "^==|tg64|GPU busy|rc=" $W/abvk.txt | sed -E "s/ +/ /g" | cut -c1-200; el "vk A/B"; save; }
else echo "no build-vk-dev or no $m: call 1's machine was not kept"; fi
rm -f $m
source build-gpu/env.sh
for mix in q2q4 mxfp4; do l=$(left); [ $l -gt 50 ] || { echo "no time for $mix"; continue; }
  w=device; [ $mix = mxfp4 ] && w=auto   # 145 GiB: more than the GPU holds
  timeout $(( l - 5 )) build-gpu/src/cli/halo bench --synthetic dsv4-flash-$mix:43 --backend cuda --weights $w \
    -p 2048 -n 64 -r 1 -o md > $W/b43-$mix.md 2>&1; grep -E "^\| deep|plan" $W/b43-$mix.md | sed 's/  */ /g'; el "$mix"; done
tar czf $out/f2.tgz -C $W .
