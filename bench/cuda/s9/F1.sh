#!/bin/bash
# Session 9 final call 1 (merged main): the CUDA build; first the mxfp4 mix at 43 layers
# (--weights auto: 145 GiB is more than the GPU holds); then every CUDA GPU test and every Vulkan
# test side by side (correctness only; nothing is timed meanwhile) while the 24-layer q2 GGUF for
# call 2 is written.
# Logs re-packed into $OUT/f1.tgz after every step (a call cut short still returns them).
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f1; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/f1.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -f /dev/shm/halo-*.gguf*
mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs
timeout 110 scripts/device-setup.sh .carry/cuda/debs > $W/setup.log 2>&1 || tail $W/setup.log
source build-gpu/env.sh; el "cuda built"
# First, while /dev/shm is empty: the host holds the gpu-host 9.56 GiB and one fill batch.
H=build-gpu/src/cli/halo
timeout 130 $H bench --synthetic dsv4-flash-mxfp4:43 --backend cuda --weights auto \
  -p 2048 -n 64 -r 1 -o md > $W/b43-mxfp4.md 2>&1; echo "mxfp4 rc=$?"
grep -E "^\| deep|plan|loaded|rror" $W/b43-mxfp4.md | sed 's/  */ /g' | cut -c1-200; el mxfp4; save
# The 24-layer GGUF for call 2 is written meanwhile (CPU and host memory only), with the CUDA
# build's halo (the same writer as any build's).
m=/dev/shm/halo-dsv4-q2-24.gguf
(timeout 150 build-gpu/src/cli/halo bench --synthetic dsv4-flash-q2:24 --write-gguf $m.part \
  > $W/write.log 2>&1 && mv $m.part $m) &
(CTEST_REGEX="vulkan_(ops|golden|hazard|engine|split|intdot|placement|synthetic)" OUT=$W/vk \
  timeout -k 5 260 scripts/device-vulkan.sh .carry/vulkan/debs > $W/vk-tests.log 2>&1
  echo "vulkan tests rc=$?" >> $W/vk-tests.log) &
(cd build-gpu && timeout -k 5 230 ctest --output-on-failure -j 6 -R "cuda|gpu") > $W/cuda-tests.log 2>&1
echo "cuda tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|Not Run" $W/cuda-tests.log | tail -12; el "cuda tests"; save
wait; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|rc=" $W/vk-tests.log | tail -10; el "vulkan tests"; save
ls -la $m; el "24L written"
