# budget_s: 180
# cuda-decode-1 (session 7): build, GPU tests, 4-layer graph-step A/B of the session's switches
# (HALO_CUDA_PDLFIRST, HALO_CUDA_ATTSPLIT, opt-in HALO_CUDA_AHEAD=1, HALO_CUDA_EARLY,
# HALO_CUDA_MVQSM), the in-graph
# kernel trace (HALO_CUDA_TRACE=1) at depth 0 and 8192, then one 43-layer tg64 with the
# defaults if time is left. Logs under $OUT; summary on stdout.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 175 - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
ls .carry/cuda/debs/*.deb >/dev/null 2>&1 || { mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs; }
timeout 100 scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || { tail $out/setup.log; exit 1; }
source build-gpu/env.sh; el built
(cd build-gpu && timeout 55 ctest --output-on-failure -j 6 -R "cuda|gpu" > $out/gpu-tests.log 2>&1); echo "gpu tests rc=$?"
grep -E "tests passed|Failed|Passed|\*\*\*|differ" $out/gpu-tests.log | tail -12; el tests
H=build-gpu/src/cli/halo
B4="--synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0"
for v in X=1 HALO_CUDA_PDLFIRST=0 HALO_CUDA_ATTSPLIT=0 HALO_CUDA_AHEAD=1 HALO_CUDA_EARLY=0 \
         HALO_CUDA_MVQSM=2; do
  echo "== $v" >> $out/ab4.md
  env $v HALO_CUDA_GRAPH_STATS=1 timeout 8 $H bench $B4 -n 64 -d 0,8192 -r 3 -o md >> $out/ab4.md 2>&1
  echo "$v: $(grep -E '^\| deep' $out/ab4.md | tail -2 | awk -F'|' '{printf "%s ", $(NF-3)}')"
done; grep -E "launches per graph" $out/ab4.md | tail -1 | sed 's/.*kernel/kernel/'; el ab4
HALO_CUDA_TRACE=1 timeout 8 $H bench $B4 -n 32 -r 1 -o md > $out/trace4-d0.txt 2>&1
HALO_CUDA_TRACE=1 timeout 9 $H bench $B4 -n 32 -d 8192 -r 1 --no-warmup -o md > $out/trace4-d8192.txt 2>&1
for f in d0 d8192; do grep -E "^\| deep|cuda trace: [0-9]" $out/trace4-$f.txt | sed 's/  */ /g'; done; el traces
l=$(left); if [ $l -gt 28 ]; then
  HALO_CUDA_GRAPH_STATS=1 timeout $l $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device \
    -p 0 -n 64 -r 1 -o md > $out/b43.md 2>&1
  grep -E "^\| deep|graphs|reads device" $out/b43.md | sed 's/  */ /g' | head -4
else echo "no time for the 43-layer run ($l s left)"; fi; el done
