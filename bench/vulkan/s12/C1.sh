#!/bin/bash
# Session 12 call 1: llama.cpp v0.5.0's Vulkan llama-bench built in the background
# (s10/build_llama_vk.sh) and brought back xz-compressed; halo Vulkan built; every Vulkan test on
# the H200 but the three that open models/kjv-tiny.gguf (HALO_VK_TEST_ALL=1: every golden
# sequence), while the 24-layer q2 GGUF is written to /dev/shm for C2/C3.
# Carry .carry/vulkan and .carry/llsrc with bench/cuda/s7/slim.sh golden.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/c1; rm -rf $W; mkdir -p $W $out
. bench/vulkan/s12/common.sh
save() { tar czf $out/c1.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(JOBS=8 bash bench/vulkan/s10/build_llama_vk.sh > $W/llama-build.txt 2>&1
 cp /tmp/llama-vk.log $W/ 2>/dev/null
 xz -T4 -c /tmp/llama-vk/build/bin/llama-bench > $out/llama-bench.xz) &
build_test_write $W "vulkan_(placement|split|engine)"
cp $W/vk-tests.log $out/; save
wait; tail -2 $W/write.log; ls -la $m; grep "llama build rc" $W/llama-build.txt; ls -la $out/llama-bench.xz
el "24L written, llama.cpp built"; save
