#!/bin/bash
# Session 12 call 5 (the same machine, right after C4.sh): the three Vulkan tests that open
# models/kjv-tiny.gguf (placement, split, engine); halo Vulkan and halo CUDA from the
# same tree on the same 24-layer GGUF: pp512 and tg64 at depth 0 (-r 2), tg64 at depth 24,576
# (-r 1); then the Vulkan decode step at depth 0: totals (HALO_VK_PROFILE=2, tg64: GPU busy
# against wall time) and by dispatch (HALO_VK_PROFILE=3, tg16).
# Carry .carry/vulkan with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; W=/tmp/c5; rm -rf $W; mkdir -p $W $out
. bench/vulkan/s12/common.sh
save() { tar czf $out/c5.tgz -C $W .; }
[ -x build-vk-dev/src/cli/halo ] && [ -x build-gpu/src/cli/halo ] && [ -f $m ] ||
  { echo "machine not kept: no build or no $m"; exit 1; }
(vk_env; cd build-vk-dev && timeout -k 5 120 ctest -j 3 --output-on-failure \
  -R "vulkan_(placement|split|engine)") > $W/kjv-tests.log 2>&1
echo "kjv tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|Not Run|FAIL" $W/kjv-tests.log
cp $W/kjv-tests.log $out/; el "kjv tests"
# with_env vk|cu SECONDS CMD...: CMD under timeout with that backend's libraries
with_env() {
  local e=$1; shift
  ( if [ $e = vk ]; then vk_env; else source build-gpu/env.sh; fi; exec timeout "$@" )
}
for b in vulkan cuda; do
  e=vk; h=build-vk-dev/src/cli/halo; [ $b = cuda ] && { e=cu; h=build-gpu/src/cli/halo; }
  with_env $e 90 $h bench -m $m --backend $b --weights device -p 512 -n 64 -r 2 -o csv > $W/$b-d0.csv 2> $W/$b-d0.err
  echo "$b d0 rc=$?"; el "$b depth 0"; save
  with_env $e 120 $h bench -m $m --backend $b --weights device -p 0 -n 64 -d 24576 -r 1 -o csv > $W/$b-d.csv 2> $W/$b-d.err
  echo "$b d24576 rc=$?"; el "$b depth 24,576"; save
done
for f in $W/*.csv; do echo "== $(basename $f)"; cut -d, -f15-17,21-24 $f; done
with_env vk 60 env HALO_VK_PROFILE=2 build-vk-dev/src/cli/halo bench -m $m --backend vulkan -p 0 -n 64 \
  -r 1 > $W/stats-d0.md 2> $W/stats-d0.err
echo "stats rc=$?"; grep -E "vulkan stats|tg64" $W/stats-d0.err $W/stats-d0.md | tail -3
with_env vk 60 env HALO_VK_PROFILE=3 build-vk-dev/src/cli/halo bench -m $m --backend vulkan -p 0 -n 16 \
  -r 1 > $W/prof-d0.md 2> $W/prof-d0.err
echo "profile rc=$?"; grep -E "GPU busy" $W/prof-d0.err | tail -2; grep "1:" $W/prof-d0.err | head -24
el profile; save
