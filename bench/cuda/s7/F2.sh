#!/bin/bash
# Session 7 final call 2 (same machine, right after call 1): halo Vulkan vs llama.cpp v0.5.0
# Vulkan on the 24-layer q2 GGUF (two alternating rounds), halo CUDA vs llama.cpp CUDA on the same
# file, then the helpers' FINAL-AB runs
# (.carry/lead/ab.sh), then the q2q4 and mxfp4 mixes at 43 layers if time is left.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f2; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - t0) )); }
save() { tar czf $out/f2.tgz -C $W .; }
m=/dev/shm/halo-dsv4-q2-24.gguf
if [ -x build-vk-dev/src/cli/halo ] && [ -f $m ]; then
  xz -dc .carry/llvk/llama-bench.xz > /tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
  LLAMA_BENCH=/tmp/llama-bench-vk DEPTH=0 PROMPTS=512 REPS=2 ROUNDS=2 OUT=$W/vk timeout 220 bash bench/vulkan/run.sh $m > $W/vk-bench.log 2>&1
  echo "vk bench rc=$?"; tail -14 $W/vk-bench.log; el "vulkan bench"; save
  # halo CUDA against llama.cpp v0.5.0 CUDA on the same file (bench/cuda/peer.sh: llama.cpp built
  # on the dev VM for sm_90, static ggml, dynamic cudart/cublas/nccl from the machine's CUDA 13)
  xz -dc .carry/llcuda/llama-bench-cuda.xz > /tmp/llama-bench-cuda && chmod +x /tmp/llama-bench-cuda
  nccl=$(find / -name "libnccl.so.2*" -not -path "*/proc/*" 2>/dev/null | head -1)
  export LD_LIBRARY_PATH=/usr/local/cuda/lib:/usr/local/cuda/lib64${nccl:+:$(dirname $nccl)}:${LD_LIBRARY_PATH:-}
  ldd /tmp/llama-bench-cuda | grep "not found"
  LLAMA_BENCH=/tmp/llama-bench-cuda LAYERS=24 DEPTH=0 REPS=2 OUT=$W/cuda timeout 150 bash bench/cuda/peer.sh > $W/cuda-peer.log 2>&1
  echo "cuda peer rc=$?"; tail -12 $W/cuda-peer.log; el "cuda 24L vs llama.cpp"; save
else echo "no build-vk-dev or no $m: call 1's machine was not kept"; fi
rm -f $m
[ -f .carry/lead/ab.sh ] && { timeout $(( $(left) - 10 )) bash .carry/lead/ab.sh > $W/ab.txt 2>&1; grep -E "^==|^\| deep|rc=" $W/ab.txt | sed -E "s/ +/ /g" | cut -c1-160 | head -40; el "A/B"; save; }
source build-gpu/env.sh
for mix in q2q4 mxfp4; do l=$(left); [ $l -gt 50 ] || { echo "no time for $mix"; continue; }
  timeout $(( l - 5 )) build-gpu/src/cli/halo bench --synthetic dsv4-flash-$mix:43 --backend cuda --weights device \
    -p 2048 -n 64 -r 1 -o md > $W/b43-$mix.md 2>&1; grep -E "^\| deep" $W/b43-$mix.md | sed 's/  */ /g'; el "$mix"; done
tar czf $out/f2.tgz -C $W .
