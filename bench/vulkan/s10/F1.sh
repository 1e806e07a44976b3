#!/bin/bash
# Session 10 final call 1 (merged main): every Vulkan test on the H200 (golden, ops, hazard,
# engine, split, intdot, placement, moeq, synthetic) while the 24-layer q2 GGUF for the benchmark
# calls is written to /dev/shm by the same build. Carry .carry/vulkan with bench/cuda/s7/slim.sh
# off (the golden fixtures travel). Logs re-packed into $OUT/f1.tgz after every step.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f1; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
save() { tar czf $out/f1.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -f /dev/shm/halo-*.gguf*
m=/dev/shm/halo-dsv4-q2-24.gguf
(CTEST_REGEX="vulkan" OUT=$W/vk timeout -k 5 ${TEST_S:-330} scripts/device-vulkan.sh .carry/vulkan/debs \
   > $W/vk-tests.log 2>&1; echo "vulkan tests rc=$?" >> $W/vk-tests.log) &
for i in $(seq 1 60); do [ -x build-vk-dev/src/cli/halo ] && break; sleep 2; done; sleep 3
el "built: $(grep -m1 'built in' $W/vk-tests.log)"
export LD_LIBRARY_PATH=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# CPU and host memory only: the writer never opens the GPU
timeout 240 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:24 --write-gguf $m.part \
  > $W/write.log 2>&1 && mv $m.part $m; ls -la $m; el "24L written"; save
wait; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|rc=|FAIL" $W/vk-tests.log | tail -14
el "vulkan tests"; save
