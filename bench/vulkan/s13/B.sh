#!/bin/bash
# Session 13 call B (the same machine, right after A.sh): session 12's call 2 (s12/C2.sh: the
# three kjv-tiny Vulkan tests, then tg64 at depth 24,576, llama.cpp Vulkan then halo Vulkan,
# -r 1), then halo CUDA from the same tree on the same file and depth.
# Carry .carry/vulkan and .carry/llvk with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
bash bench/vulkan/s12/C2.sh
m=/dev/shm/halo-dsv4-q2-24.gguf
[ -x build-gpu/src/cli/halo ] || { echo "no build-gpu: halo CUDA not run"; exit 0; }
(source build-gpu/env.sh; timeout 120 build-gpu/src/cli/halo bench -m $m --backend cuda -p 0 -n 64 \
  -d 24576 -r 1 -o csv) > $out/cuda-d.csv 2> $out/cuda-d.err
echo "cuda d24576 rc=$?"; cut -d, -f15-17,21-24 $out/cuda-d.csv
