#!/bin/bash
# Session 6 baseline on merged main: CUDA tests, 43L speeds (depth 0 and 24,576), 4L profiles,
# one ncu decode step; Vulkan tests and a 4L Vulkan profile. Logs under $OUT.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || { tail $out/setup.log; exit 1; }
source build-gpu/env.sh; el built
(cd build-gpu && ctest --output-on-failure -j 4 -R "cuda|gpu" > $out/cuda-tests.log 2>&1); echo "cuda tests rc=$?"
grep -E "tests passed|Failed|Passed" $out/cuda-tests.log | tail -8; el tests
H=build-gpu/src/cli/halo
HALO_CUDA_GRAPH_STATS=1 timeout 170 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device \
  -p 512,2048 -n 64 -r 1 -o md > $out/b43.md 2>&1; grep -E "^\| deep|graphs|device memory" $out/b43.md; el b43
timeout 200 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device \
  -p 2048 -n 64 -d 24576 -r 1 --no-warmup -o md > $out/b43d.md 2>&1; grep -E "^\| deep" $out/b43d.md; el b43d
HALO_CUDA_PROFILE=1 timeout 60 $H bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device \
  -p 2048 -n 32 -r 1 -o md > $out/prof4.txt 2>&1; el prof4
HALO_CUDA_GRAPHS=0 timeout 90 ncu --clock-control none --launch-skip 900 --launch-count 160 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread --csv \
  $H bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0 -n 8 -r 1 > $out/ncu4.csv 2>$out/ncu4.err
python3 bench/cuda/ncu_table.py $out/ncu4.csv > $out/ncu4.txt 2>&1; tail -5 $out/ncu4.txt; el ncu
CTEST_REGEX="vulkan_(ops|golden|engine|intdot|hazard)" OUT=$out/vk scripts/device-vulkan.sh .carry/vulkan/debs > $out/vk-tests.log 2>&1
echo "vulkan tests rc=$?"; grep -E "tests passed|Failed|Passed" $out/vk-tests.log | tail -7; el vktests
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
HALO_VK_PROFILE=1 timeout 60 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:4 --backend vulkan -p 512 -n 32 -r 1 -o md > $out/vkprof4.txt 2>&1
grep -E "^\| deep" $out/vkprof4.txt; el done
