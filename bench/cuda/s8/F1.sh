#!/bin/bash
# Session 8 final call 1 (merged main): CUDA build, then the GPU tests and the Vulkan build and
# tests side by side (correctness only; nothing is timed meanwhile), then the 43-layer q2
# headline at depth 0 and 24,576 with the session's defaults, the 24-layer GGUF for call 2, then
# the helpers' 43-layer A/B runs (.carry/lead/ab43.sh) in the time left.
# Logs re-packed into $OUT/f1.tgz after every step (a call cut short still returns them).
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f1; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/f1.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs
timeout 110 scripts/device-setup.sh .carry/cuda/debs > $W/setup.log 2>&1 || tail $W/setup.log
source build-gpu/env.sh; el "cuda built"
(CTEST_REGEX="vulkan_(ops|golden|hazard|engine|split|intdot|placement)" OUT=$W/vk timeout -k 5 250 \
  scripts/device-vulkan.sh .carry/vulkan/debs > $W/vk-tests.log 2>&1; echo "vulkan tests rc=$?" >> $W/vk-tests.log) &
(cd build-gpu && timeout -k 5 220 ctest --output-on-failure -j 6 -R "cuda|gpu") > $W/cuda-tests.log 2>&1
echo "cuda tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|Not Run" $W/cuda-tests.log | tail -12; el "cuda tests"; save
wait; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|rc=" $W/vk-tests.log | tail -9; el "vulkan tests"; save
pkill -f "test_backend|test_model" ; sleep 1
H=build-gpu/src/cli/halo
HALO_CUDA_GRAPH_STATS=1 timeout 100 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device \
  -p 512,2048 -n 64 -r 1 -o md > $W/b43.md 2>&1; grep -E "^\| deep|graphs|reads device|host us" $W/b43.md | sed 's/  */ /g' | cut -c1-220; el b43; save
timeout 110 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device \
  -p 2048 -n 64 -d 24576 -r 1 --no-warmup -o md > $W/b43d.md 2>&1; grep -E "^\| deep" $W/b43d.md | sed 's/  */ /g'; el b43d; save
export LD_LIBRARY_PATH=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
m=/dev/shm/halo-dsv4-q2-24.gguf
[ -f $m ] || { timeout 90 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:24 --write-gguf $m.part > $W/write.log 2>&1 && mv $m.part $m; }
ls -la $m; el "24L written"; save
[ -f .carry/lead/ab43.sh ] && { timeout 130 bash .carry/lead/ab43.sh > $W/ab43.txt 2>&1; grep -E "^==|^\| deep|rc=" $W/ab43.txt | sed -E "s/ +/ /g" | cut -c1-200; el "A/B 43L"; save; }
