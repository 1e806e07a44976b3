#!/bin/bash
# Session 7, call 1 (lead): the CPU issue's 8-thread rounds on the Xeon (machine quiet, first),
# then whether the session's rewind checkpoints (every 256 positions, each one splitting the
# 512-token forward) cost the CUDA prefill its speed at depth 0: pp2048 with the default
# checkpoints, with 512 positions between them, and with none (halo bench --checkpoints).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
THREADS=8 ROUNDS=2 AB=0 timeout 300 bench/cpu/device.sh > $out/cpu8.log 2>&1
grep -E "^\||ratio|threads done|model" $out/cpu8.log | tail -24; el cpu8
mkdir -p .carry/cuda && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs
scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || { tail $out/setup.log; exit 1; }
source build-gpu/env.sh; el built
H=build-gpu/src/cli/halo
for c in default 512 off; do
  a=""; [ $c = default ] || a="--checkpoints $c"
  timeout 60 $H bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 512,2048 -n 0 -r 2 $a -o md 2>/dev/null | grep -E "^\| deep" | sed "s/^/ckpt=$c /"
done; el 4L
for c in default 512 off; do
  a=""; [ $c = default ] || a="--checkpoints $c"
  timeout 75 $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device -p 2048 -n 0 -r 2 $a -o md 2>/dev/null | grep -E "^\| deep" | sed "s/^/ckpt=$c /"
  el "43L $c"
done
