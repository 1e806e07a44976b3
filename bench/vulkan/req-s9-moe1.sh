# budget_s: 120
# Session 9, vk-moe request 1 (run from a fresh main with the s9-vk-moe overlay): moe_dec.comp,
# one decode token's routed experts in two dispatches (HALO_VK_MOE_DEC=N workgroups, default
# 512; 0: matvec_moe.comp as before), against the old path, same call.
#   1. build; tests: ops filtered to moe_dec (old path,
#      new, new with 3 workgroups: each against the CPU; the new path's dispatch count);
#   2. bench_vk_matvec, the MoE call only (router, 6 of 256 experts, shared expert: warm with
#      one input, cold cycling 16 inputs), new / old / 2048 workgroups, two passes; then the
#      cold calls' per-dispatch stamps, new and old;
#   3. the decode step's per-dispatch stamps at 4 layers (tg32), new;
#   4. the whole step, 8 layers tg64 -r 3, alternating new / old, two rounds.
# $OUT: summary.txt, moe.md, prof-*.txt, tests.log (tail).
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s9moe1
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
left() { echo $((116 - ($(date +%s) - t0))); }
HALO_VK_TEST_ONLY=moe_dec CTEST_REGEX="vulkan_ops" OUT=$out timeout 45 \
    scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in|moe_dec|dispatches" \
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

# 2. the MoE call alone
BENCH_VK_MOE_ONLY=1 BENCH_VK_MOE_PASSES=2 timeout 22 stdbuf -oL \
    build-vk-dev/bench/bench_vk_matvec 100 - HALO_VK_MOE_DEC=0 HALO_VK_MOE_DEC=2048 \
    HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold \
    HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold,HALO_VK_MOE_DEC=0 >"$final/moe.md" 2>"$out/moe.err"
echo "bench rc=$? (config | call | us | GB/s | rel err vs CPU)"
awk -F'|' '$6 ~ /[0-9]/ { printf "  %-44s %-5s %9s %7s %s\n", substr($2,1,44), \
    ($3 ~ /one input/ ? "warm" : "cold"), $6, $7, $9 }' "$final/moe.md"
grep -E "^bench_vk_matvec: config|vulkan profile: moe/" "$out/moe.err" | cut -c1-150 \
    >"$final/prof-moe.txt"
grep -E "config|moe_dec|matvec_moe" "$final/prof-moe.txt" | cut -c17-150
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
[ "$(left)" -gt 45 ] && prof new
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
    [ "$(left)" -gt 15 ] && tg new8r$round
    [ "$(left)" -gt 15 ] && tg old8r$round HALO_VK_MOE_DEC=0
done
el "all done"
