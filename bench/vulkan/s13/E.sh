#!/bin/bash
# Session 13 call E (the same machine, right after D.sh): the three kjv-tiny Vulkan tests, then
# the 24-layer GGUF (46 GiB of device weights) loaded onto halo Vulkan four times, alternating
# the staged writes' GPU copies straight from the loader's pinned buffers (the default) with
# HALO_VK_PINNED_COPY=0 (through the 32 MiB staging buffer, as before), each load's time as
# halo bench prints it. Carry .carry/vulkan with bench/cuda/s7/slim.sh bench (kjv-tiny kept).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
. bench/vulkan/s12/common.sh
[ -x build-vk-dev/src/cli/halo ] && [ -f $m ] || { echo "machine not kept: no build or no $m"; exit 1; }
vk_env
(cd build-vk-dev && timeout -k 5 120 ctest -j 3 --output-on-failure -R "vulkan_(placement|split|engine)") > $out/kjv-tests.log 2>&1
echo "kjv tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|Not Run|FAIL" $out/kjv-tests.log
for v in 1 0 1 0; do
  timeout 90 env HALO_VK_PINNED_COPY=$v build-vk-dev/src/cli/halo bench -m $m --backend vulkan -p 0 -n 4 \
    -r 1 --no-warmup -o csv > $out/load-$v.csv 2> $out/load-$v.err
  echo "HALO_VK_PINNED_COPY=$v rc=$? $(grep -h 'loaded in' $out/load-$v.err) $(cut -d, -f21-22 $out/load-$v.csv | tail -1)"
  cat $out/load-$v.err >> $out/loads.log
done
el loads
