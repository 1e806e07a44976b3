#!/bin/bash
# Session 9 call 2 (right after P1, same machine): the rest of issue 12's report. The mxfp4 mix at
# 43 layers (145 GiB: more than the GPU holds, so --weights auto: device + GPU-visible host);
# the q2 mix with every weight in GPU-visible host memory (bounded by the host link, which bench
# measures); the longest launches of the kernels whose work grows with depth at 131,072 tokens
# (ncu, the last batches of a 131,072-token fill of the 4-layer model).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${BUDGET:-570} - ($(date +%s) - t0) )); }
rm -f /dev/shm/halo-*.gguf*
if [ ! -x build-gpu/src/cli/halo ]; then
  mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs
  timeout 110 scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || tail $out/setup.log
fi
source build-gpu/env.sh; H=build-gpu/src/cli/halo; el "ready"
timeout $(( $(left) - 200 )) $H bench --synthetic dsv4-flash-mxfp4:43 --backend cuda --weights auto \
  -p 512 -n 32 -r 1 -o md > $out/b43-mxfp4.md 2>&1; echo "mxfp4 rc=$?"
grep -E "^\| deep|plan|loaded|rror|bandwidth" $out/b43-mxfp4.md | sed 's/  */ /g'; el mxfp4
timeout $(( $(left) - 80 )) $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights host \
  -p 32 -n 16 -r 1 -o md > $out/b43-host.md 2>&1; echo "host rc=$?"
grep -E "^\| deep|plan|loaded|rror|bandwidth" $out/b43-host.md | sed 's/  */ /g'; el host
timeout $(( $(left) - 5 )) ncu --clock-control none -k regex:"topk_score_mma|select_kernel|attention_mma" \
  --launch-skip 1500 --launch-count 36 --metrics gpu__time_duration.sum $H bench \
  --synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 512 -n 0 -d 131072 -r 1 \
  --no-warmup -o md > $out/ncu131072.txt 2>&1; echo "ncu rc=$?"
grep -E "gpu__time_duration" $out/ncu131072.txt | awk '{print $NF, $(NF-1)}' | sort -n | tail -3; el ncu
