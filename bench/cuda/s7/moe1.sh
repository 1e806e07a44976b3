# budget_s: 180
# cuda-moe-1 (session 7): the experts' decode path. Build, the GPU tests, then graph-step A/Bs
# of the new switches on the 4-layer q2 model (tg64, alternating), one 43-layer tg64, and an
# ncu pass over one decode token's moe kernels (why gate/up and down run at ~0.9 TB/s).
#   HALO_CUDA_GUFUSE: unset = SwiGLU + h quantization in the gate/up kernel with moe_gu.cuh's
#   IQ2_XXS decoder; 1 = fused with mvq.cuh's decoder; 0 = before (two launches).
#   HALO_CUDA_ROUTEFUSE=1: the reworked norm + router + routing kernel (opt-in).
#   HALO_CUDA_DNHOLD=1 / 2: down with a warp's rows in one pair, h in registers (opt-in).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 176 - ($(date +%s) - t0) )); }
ls .carry/cuda/debs/*.deb >/dev/null 2>&1 || { mkdir -p .carry/cuda && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs; }
scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || { tail $out/setup.log; exit 1; }
source build-gpu/env.sh; el built
(cd build-gpu && timeout 90 ctest --output-on-failure -j 6 -R "cuda|gpu" > $out/tests.log 2>&1); echo "tests rc=$?"
grep -E "Test +#|tests passed|SwiGLU|two rows|held|DIFFER|FAIL|fused" $out/tests.log | grep -v "^ *moe .*max|d|" | head -24; el tests
H=build-gpu/src/cli/halo
B="bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0 -n 64 -r 5 -o md"
for v in X=1 HALO_CUDA_GUFUSE=0 HALO_CUDA_GUFUSE=1 HALO_CUDA_DNHOLD=1 HALO_CUDA_DNHOLD=2 X=2 \
         HALO_CUDA_GUFUSE=0 HALO_CUDA_ROUTEFUSE=1; do
  [ $(left) -gt 60 ] || break
  echo "== tg64 4L $v"; env HALO_CUDA_GRAPH_STATS=1 $v timeout 12 $H $B 2>&1 | grep -E "^\| deep|graphs:" | sed -E 's/.*(kernel launches per graph step [0-9.]+).*/  \1/'
done > $out/ab4.txt; sed -E 's/^\| deepseek4 4L dsv4-flash-q2:4 +\|.*\| +tg64 +\| +([0-9., ±]+) \|.*/  tg64 \1/' $out/ab4.txt; el ab4
T=$(left); [ $T -gt 55 ] && { HALO_CUDA_GRAPHS=0 timeout 25 ncu --clock-control none -k regex:"moeq_gu|moeq_down|route1" --launch-skip 12 --launch-count 6 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis $H bench --synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0 -n 4 -r 1 --no-warmup -o md > $out/ncu-moe.txt 2>&1; grep -E "^  [a-z_].*\(|Duration|DRAM Through|Registers Per|Achieved Occ|Issue Slots Busy|No Eligible|Executed Ipc A|Warp Cycles Per Issued|stalled" $out/ncu-moe.txt | cut -c1-110 > $out/ncu-sum.txt; grep -cE "Duration" $out/ncu-sum.txt; el ncu; }
T=$(left); [ $T -gt 40 ] && { HALO_CUDA_GRAPH_STATS=1 timeout $((T-8)) $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device -p 0 -n 64 -r 2 -o md > $out/b43.md 2>&1; grep -E "^\| deep|graphs:" $out/b43.md | sed -E 's/halo cuda graphs: .*(kernel launches per graph step [0-9.]+).*/  \1/'; el b43; }
el done
