#!/bin/bash
# Session 13 call C (the same machine, right after B.sh): session 11's call B with the
# ablations (ABLATE=1 s11/FB.sh: pp512, pp2048, tg64 at depth 0 for llama.cpp Vulkan and halo
# Vulkan, -r 2; halo's knob ablations), then halo CUDA from the same tree on the same file.
# Carry .carry/vulkan and .carry/llvk with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
ABLATE=1 bash bench/vulkan/s11/FB.sh
m=/dev/shm/halo-dsv4-q2-24.gguf
[ -x build-gpu/src/cli/halo ] || { echo "no build-gpu: halo CUDA not run"; exit 0; }
(source build-gpu/env.sh; timeout 90 build-gpu/src/cli/halo bench -m $m --backend cuda -p 512,2048 \
  -n 64 -r 2 -o csv) > $out/cuda-d0.csv 2> $out/cuda-d0.err
echo "cuda d0 rc=$?"; cut -d, -f15-17,21-24 $out/cuda-d0.csv
