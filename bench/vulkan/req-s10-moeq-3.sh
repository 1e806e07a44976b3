# budget_s: 150
# Session 10, vk-moeq request 3 (a fresh main with the s10-vk-moeq overlay): moeq.comp (now the
# fast-mode default) and its variants (HALO_VK_MOEQ_VAR bits: 1 sign-mask table, 2 codebook in
# 16 copies, 4 gate/up's x in registers, 8 with 4 the next row's loads ahead, 16 down's first
# loads before its quantization, 32 the quantization's loads at once).
#   1. build; test_backend_vulkan_moeq (against the fast CPU; the variants' bits);
#   2. bench_vk_matvec, the MoE call only, fast mode, each variant, two passes; the cold calls'
#      stamps of the default and of the fastest variant;
#   3. 8-layer tg64 -r 4 (tgj.sh: median of repetitions 2..4), alternating default / fastest
#      variant / HALO_VK_MOEQ=0, two rounds; then 24 layers default / HALO_VK_MOEQ=0 if time.
# $OUT: summary.txt, moe.md, prof-moe.txt, tests-tail.log, ab.txt.
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s10moeq3
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
left() { echo $((146 - ($(date +%s) - t0))); }
CTEST_REGEX="vulkan_moeq" OUT=$out timeout 50 \
    scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in|token\(s\)|bits|device:" \
    "$out/tests.log" | tail -24
grep -E "FAIL|failed checks" "$out/tests.log" | head -5
tail -40 "$out/tests.log" >"$final/tests-tail.log"
el "tests done"
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
[ -x $halo ] || { echo "no halo binary"; exit 1; }

# 2. the MoE call alone, each variant (bench_vk_matvec makes a precise backend: HALO_VK_FAST=1)
F=HALO_VK_FAST=1
cfgs=""
for v in 0 16 32 48 4 12 15 60 63; do cfgs="$cfgs $F,HALO_VK_MOEQ_VAR=$v"; done
BENCH_VK_MOE_ONLY=1 BENCH_VK_MOE_PASSES=2 timeout 40 stdbuf -oL \
    build-vk-dev/bench/bench_vk_matvec 100 $cfgs $F,HALO_VK_MOEQ=0 >"$final/moe.md" 2>"$out/moe.err"
echo "bench rc=$? (config | call | us | GB/s | rel err vs precise CPU)"
awk -F'|' '$6 ~ /[0-9]/ { printf "  %-44s %-5s %9s %7s %s\n", substr($2,1,44), \
    ($3 ~ /one input/ ? "warm" : "cold"), $6, $7, $9 }' "$final/moe.md"
# the fastest variant by its best cold call
best=$(awk -F'|' '$6 ~ /[0-9]/ && $3 !~ /one input/ && $2 ~ /MOEQ_VAR=/ {
    split($2, a, "MOEQ_VAR="); v = a[2] + 0; t = $6 + 0;
    if (!(v in m) || t < m[v]) m[v] = t } END { b = -1; for (v in m) if (b < 0 || m[v] < m[b]) b = v;
    print b }' "$final/moe.md")
echo "fastest variant: $best"
BENCH_VK_MOE_ONLY=1 timeout 20 build-vk-dev/bench/bench_vk_matvec 100 \
    HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold,$F \
    HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold,$F,HALO_VK_MOEQ_VAR=$best >"$out/prof.md" 2>"$out/prof.err"
grep -E "^bench_vk_matvec: config|vulkan profile: moe/" "$out/prof.err" | cut -c1-150 \
    >"$final/prof-moe.txt"
grep -E "config|moeq" "$final/prof-moe.txt" | cut -c17-150
el "bench done"

# 3. the whole step
export W=$out
a8="--synthetic dsv4-flash-q2:8 --backend vulkan --weights device -p 0 -n 64 -r 4"
for r in 1 2; do
    [ "$(left)" -gt 45 ] && bash bench/vulkan/s10/tgj.sh moeq$r "X=1" $a8
    [ "$(left)" -gt 30 ] && bash bench/vulkan/s10/tgj.sh var$best.$r "HALO_VK_MOEQ_VAR=$best" $a8
    [ "$(left)" -gt 20 ] && bash bench/vulkan/s10/tgj.sh f32_$r "HALO_VK_MOEQ=0" $a8
done | tee "$final/ab.txt"
el "8-layer A/B done"
a24="--synthetic dsv4-flash-q2:24 --backend vulkan --weights device -p 0 -n 64 -r 3"
[ "$(left)" -gt 35 ] && TGJ_TIMEOUT=30 bash bench/vulkan/s10/tgj.sh moeq24 "X=1" $a24 | tee -a "$final/ab.txt"
[ "$(left)" -gt 20 ] && TGJ_TIMEOUT=30 bash bench/vulkan/s10/tgj.sh f32_24 "HALO_VK_MOEQ=0" $a24 | tee -a "$final/ab.txt"
el "all done"
