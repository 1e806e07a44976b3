# budget_s: 130
# cuda-dense-1 (session 8): build, then the whole CUDA GPU test set once (main's refactored topk
# tests; this branch's tests of hcpost2 (and the ffn norm in it), the norm-rope pair, the rope
# with the queued copies, the half-row projection and the 7-slot ring against their switches; the graph replay with HALO_CUDA_GRAPH_FIRST=1). In the
# seconds left, 4-layer tg64 with HALO_CUDA_GRAPH_STATS=1 (graph counters and the host's times of
# a graph step): defaults, then the three new paths off. Logs under $OUT; summary on stdout.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 126 - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
ls .carry/cuda/debs/*.deb >/dev/null 2>&1 || { mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs; }
timeout 70 scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || { tail $out/setup.log; exit 1; }
source build-gpu/env.sh; el built
# ctest in a process group of its own, killed whole at the deadline (a timeout on ctest alone
# leaves its test processes on the GPU: session 7's cd-1)
(cd build-gpu && exec setsid ctest --output-on-failure -j 6 -R "cuda|gpu" > $out/gpu-tests.log 2>&1) &
tp=$!
dl=$(( $(left) - 2 ))
(exec setsid bash -c "sleep $dl; kill -TERM -- -$tp; sleep 2; kill -KILL -- -$tp") >/dev/null 2>&1 &
wp=$!
wait $tp; echo "gpu tests rc=$? (deadline ${dl}s)"; kill -- -$wp 2>/dev/null
grep -E "Test +#|tests passed|DIFFER|outputs differ from" $out/gpu-tests.log | cut -c1-150 | tail -16
el tests
H=build-gpu/src/cli/halo
B4="--synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0 -n 64 -r 2 -o md"
for v in X=1 "HALO_CUDA_HCPOST2=0 HALO_CUDA_NRPAIR=0 HALO_CUDA_ROPECOPY=0 HALO_CUDA_HCNORM=0 HALO_CUDA_MVQSPLIT=0"; do
  [ $(left) -gt 9 ] || { echo "no time for $v"; break; }
  echo "== $v" >> $out/ab4.md
  env $v HALO_CUDA_GRAPH_STATS=1 timeout 8 $H bench $B4 >> $out/ab4.md 2>&1
  echo "$v: $(grep -E '^\| deep' $out/ab4.md | tail -1 | awk -F'|' '{print $(NF-3)}')"
  grep -E "host us a graph step|launches per graph" $out/ab4.md | tail -2 | sed -E 's/halo cuda graphs: //' | cut -c1-400
done
el done
