#!/bin/bash
# Session 12 call 4 (a fresh machine, the final tree): halo with CUDA built in the background
# (scripts/device-setup.sh on the Vulkan carry's Debian files, a superset of the CUDA ones);
# halo Vulkan built and every Vulkan test run on the H200 (HALO_VK_TEST_ALL=1: every golden
# sequence) but the three that open models/kjv-tiny.gguf (C5 runs those), while the 24-layer q2
# GGUF is written to /dev/shm for C5. Carry .carry/vulkan with bench/cuda/s7/slim.sh golden
# (the golden fixtures, kjv-tiny and the carry do not fit in one upload of 64 MiB).
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/c4; rm -rf $W; mkdir -p $W $out
. bench/vulkan/s12/common.sh
save() { tar czf $out/c4.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(timeout 300 scripts/device-setup.sh .carry/vulkan/debs/prefix > $W/cuda-setup.log 2>&1
 echo "cuda setup rc=$?" >> $W/cuda-setup.log) &
build_test_write $W "vulkan_(placement|split|engine)"
cp $W/vk-tests.log $out/; save
wait; tail -2 $W/write.log; ls -la $m; tail -2 $W/cuda-setup.log
el "24L written, CUDA built"; save
