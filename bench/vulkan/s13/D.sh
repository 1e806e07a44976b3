#!/bin/bash
# Session 13 call D (a fresh machine, the tree with the pinned copies): halo Vulkan built, every
# Vulkan test but the three kjv-tiny ones (every golden sequence) while the 24-layer q2 GGUF is
# written to /dev/shm for E.sh; then the GPU load test on Vulkan (its file on the machine's disk:
# O_DIRECT reads into the loader's pinned buffers, copied into VRAM straight from them).
# Carry .carry/vulkan with bench/cuda/s7/slim.sh golden.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/d; rm -rf $W; mkdir -p $W $out
. bench/vulkan/s12/common.sh
build_test_write $W "vulkan_(placement|split|engine)"
cp $W/vk-tests.log $out/
(vk_env; cd build-vk-dev && timeout -k 5 150 ctest --output-on-failure -V -R gpu_load) > $out/gpu-load.log 2>&1
echo "gpu_load rc=$?"; grep -E "loaded|vs CPU|^.*ok |FAIL|tests passed|skipped" $out/gpu-load.log | sed 's/^[0-9]*: //'
wait; tail -1 $W/write.log; ls -la $m; el "written"
