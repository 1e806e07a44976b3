# budget_s: 140
# Session 10, vk-moeq request 1 (a fresh main with the s10-vk-moeq overlay): moeq.comp, fast
# mode's routed experts of a decode token on int8 activations (HALO_VK_MOEQ=1; off by default
# until this says it is faster), against matvec_moe.comp's f32 path (HALO_VK_MOEQ=0), same call.
#   1. build; test_backend_vulkan_moeq (against the fast CPU) and the intdot test;
#   2. bench_vk_matvec, the MoE call only, fast mode: moeq / f32 / moeq with other rows a
#      workgroup (HALO_VK_MOEQ_ROWS=GU:DN, default 32:16), two passes; the cold calls' stamps;
#   3. the decode step's per-dispatch stamps at 4 layers (tg32), moeq;
#   4. the whole step, 8 layers tg64 -r 3, alternating moeq / f32, two rounds.
# $OUT: summary.txt, moe.md, prof-*.txt, tests-tail.log.
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s10moeq1
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
left() { echo $((136 - ($(date +%s) - t0))); }
CTEST_REGEX="vulkan_moeq|vulkan_intdot" OUT=$out timeout 50 \
    scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in|token\(s\)|device:" \
    "$out/tests.log" | tail -14
grep -E "FAIL|failed checks" "$out/tests.log" | head -5
tail -60 "$out/tests.log" >"$final/tests-tail.log"
el "tests done"
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
[ -x $halo ] || { echo "no halo binary"; exit 1; }

# 2. the MoE call alone (bench_vk_matvec makes a precise backend: HALO_VK_FAST=1 in each config)
F=HALO_VK_FAST=1
BENCH_VK_MOE_ONLY=1 BENCH_VK_MOE_PASSES=2 timeout 30 stdbuf -oL \
    build-vk-dev/bench/bench_vk_matvec 100 $F,HALO_VK_MOEQ=1 $F,HALO_VK_MOEQ=0 \
    $F,HALO_VK_MOEQ=1,HALO_VK_MOEQ_ROWS=16:32 $F,HALO_VK_MOEQ=1,HALO_VK_MOEQ_ROWS=64:8 \
    $F,HALO_VK_MOEQ=1,HALO_VK_MOEQ_ROWS=8:64 \
    HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold,$F,HALO_VK_MOEQ=1 \
    HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold,$F,HALO_VK_MOEQ=0 >"$final/moe.md" 2>"$out/moe.err"
echo "bench rc=$? (config | call | us | GB/s | rel err vs precise CPU)"
awk -F'|' '$6 ~ /[0-9]/ { printf "  %-52s %-5s %9s %7s %s\n", substr($2,1,52), \
    ($3 ~ /one input/ ? "warm" : "cold"), $6, $7, $9 }' "$final/moe.md"
grep -E "^bench_vk_matvec: config|vulkan profile: moe/" "$out/moe.err" | cut -c1-150 \
    >"$final/prof-moe.txt"
grep -E "config|moeq|matvec_moe" "$final/prof-moe.txt" | cut -c17-150
tail -5 "$out/moe.err"
el "bench done"

# 3. the decode step's stamps at 4 layers
prof() { # NAME ENV...
    local name=$1
    shift
    env HALO_VK_PROFILE=1 "$@" timeout 12 $halo bench --synthetic dsv4-flash-q2:4 \
        --backend vulkan --weights device -p 0 -n 32 -r 1 >/dev/null 2>"$out/prof4-$name.err"
    echo "prof4 $name rc=$?"
    grep "vulkan profile: " "$out/prof4-$name.err" | tail -26 >"$final/prof4-$name.txt"
    grep -E "moe|GPU busy" "$final/prof4-$name.txt" | cut -c17-160 | head -9
}
[ "$(left)" -gt 50 ] && prof moeq HALO_VK_MOEQ=1
el "profiles done"

# 4. 8 layers, alternating
tg() { # NAME ENV...
    local name=$1
    shift
    env HALO_VK_PROFILE=2 "$@" timeout 14 $halo bench --synthetic dsv4-flash-q2:8 \
        --backend vulkan --weights device -p 0 -n 64 -r 3 >"$out/tg-$name.md" 2>"$out/tg-$name.err"
    local rc=$? ts=$(grep -E "\| +tg64 " "$out/tg-$name.md" | awk -F'|' '{print $(NF-3)}')
    echo "$name ($*): rc=$rc tg64 $ts"
    grep "GPU busy" "$out/tg-$name.err" | tail -1 | cut -c15-190 | sed 's/^/    /'
}
for round in 1 2; do
    [ "$(left)" -gt 15 ] && tg moeq8r$round HALO_VK_MOEQ=1
    [ "$(left)" -gt 15 ] && tg f32_8r$round HALO_VK_MOEQ=0
done
el "all done"
