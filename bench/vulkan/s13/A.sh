#!/bin/bash
# Session 13 call A (a fresh machine, the final tree): session 12's call 1 (s12/C1.sh: llama.cpp
# v0.5.0's Vulkan llama-bench built and brought back, halo Vulkan built, every Vulkan test but the
# three kjv-tiny ones with every golden sequence, the 24-layer q2 GGUF written to /dev/shm), and
# halo with CUDA built from the same tree in the background at low priority (as s12/C4.sh).
# Carry .carry/vulkan and .carry/llsrc with bench/cuda/s7/slim.sh golden.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
(nice -n 10 timeout 420 scripts/device-setup.sh .carry/vulkan/debs/prefix > $out/cuda-setup.log 2>&1
 echo "cuda setup rc=$?" >> $out/cuda-setup.log) &
bash bench/vulkan/s12/C1.sh
wait; tail -2 $out/cuda-setup.log; ls -la build-gpu/src/cli/halo
