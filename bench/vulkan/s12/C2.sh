#!/bin/bash
# Session 12 call 2 (the same machine, right after C1.sh: build-vk-dev and the 24-layer GGUF are
# there): the three Vulkan tests that open models/kjv-tiny.gguf (placement, split, engine), then
# tg64 at depth 24,576 on the GGUF, llama.cpp v0.5.0 Vulkan then halo Vulkan (s10/F3.sh, -r 1;
# the fill is not timed). Carry .carry/vulkan and .carry/llvk with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/c2; rm -rf $W; mkdir -p $W $out
. bench/vulkan/s12/common.sh
[ -x build-vk-dev/src/cli/halo ] && [ -f $m ] || { echo "machine not kept: no build or no $m"; exit 1; }
vk_env
(cd build-vk-dev && timeout -k 5 120 ctest -j 3 --output-on-failure -R "vulkan_(placement|split|engine)") > $W/kjv-tests.log 2>&1
echo "kjv tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|Not Run|FAIL" $W/kjv-tests.log
cp $W/kjv-tests.log $out/; el "kjv tests"
for f in .carry/vulkan/debs/root/*.deb; do dpkg -x $f /; done; ldconfig
LL_S=${LL_S:-230} HALO_S=${HALO_S:-150} bash bench/vulkan/s10/F3.sh > $W/f3.log 2>&1; tail -6 $W/f3.log
cp /tmp/f3/*-d.csv /tmp/f3/*-d.err $out/ 2>/dev/null; el "depth 24,576"
