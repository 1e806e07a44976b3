#!/bin/bash
# Session 6 final call 2: the Vulkan tests call 1 ran out of time for (hazard, engine, split,
# intdot), then the Xeon CPU run (the cpu helper's request, through the queue dispatcher).
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/f2; rm -rf $W; mkdir -p $W $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
CTEST_REGEX="vulkan_(hazard|engine|split|intdot)" OUT=$W/vk timeout 80 scripts/device-vulkan.sh .carry/vulkan/debs > $W/vk-tests.log 2>&1
echo "vulkan tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec" $W/vk-tests.log | tail -6; el "vulkan tests"
mkdir -p .carry/queue/cpu-1 && cp /dev/null /dev/null
OUT=$W/q bash .carry/lead/dispatch.sh 2>&1 | tail -30; el "cpu"
tar czf $out/f2.tgz -C $W .
