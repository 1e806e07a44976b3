# budget_s: 180
# cuda-prefill-1: tensor-core prefill attention + indexer scores (HALO_CUDA_ATTMMA / TOPKMMA).
# (The script as it ran at 20:23 on branch s6-cuda-prefill cd0e5ab; the request's later overlay
# with the weight ring was not the one the call took.)
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 172 - ($(date +%s) - t0) )); }
scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || { tail $out/setup.log; exit 1; }
source build-gpu/env.sh; el built
(cd build-gpu && timeout 70 ctest --output-on-failure -j 2 -R "cuda_ops|full_width" > $out/tests.log 2>&1); echo "tests rc=$?"
grep -E "tests passed|Failed|Passed|attention fast|topk fast|fast-mode|FAIL" $out/tests.log | head -20; el tests
H=build-gpu/src/cli/halo
B="bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device -r 1 -o md"
prof() { grep -E "^\| deep|prefill:|^  (matmul|attention|topk|moe|pool|hc_pre|copy) |^  \. (mm|moe)" ; }
{ echo "== 4L pp2048 d0 new"; HALO_CUDA_PROFILE=1 timeout 25 $H $B -p 2048 -n 0 2>&1 | prof
  echo "== 4L pp512 d24576 new"; HALO_CUDA_PROFILE=1 timeout 30 $H $B -p 512 -n 0 -d 24576 2>&1 | prof
  echo "== 4L pp512 d24576 off (ATTMMA=0 TOPKMMA=0)"; HALO_CUDA_ATTMMA=0 HALO_CUDA_TOPKMMA=0 HALO_CUDA_PROFILE=1 timeout 40 $H $B -p 512 -n 0 -d 24576 2>&1 | prof
} > $out/prof4.txt; cat $out/prof4.txt | grep -E "==|^\||attention|topk|moe  "; el prof4
T=$(left); [ $T -gt 45 ] && { timeout $((T-5)) $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device -p 2048 -n 0 -r 1 -o md > $out/b43.md 2>&1; grep -E "^\| deep" $out/b43.md; el b43; }
T=$(left); [ $T -gt 25 ] && { timeout $((T-3)) ncu --clock-control none -k regex:gm_moe --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats $H $B -p 512 -n 0 --no-warmup > $out/ncu-moe.txt 2>&1; grep -E "Duration|Throughput|Achieved Occupancy|Registers|Stall|Warp Cycles" $out/ncu-moe.txt | head -30; el ncu; }
el done
