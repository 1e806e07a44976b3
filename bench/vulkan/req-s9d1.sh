# budget_s: 150
# (Record of the run as sent: hc_mix1.comp and HALO_VK_HC_MIX1 were removed after it, and
# HALO_VK_MVQ8S unset now means off; see bench/vulkan/RESULTS.md, session 9.)
# Session 9, vk-dense request 1 (a fresh main with the s9-vk-dense overlay). Questions: is the
# Q8_0 decode matvec bound by bytes in flight on cold weights, and is hc_pre's projection bound
# by re-reading the streams? matvec_q8.comp (4-byte loads at block-dependent offsets) against
# matvec_q8s.comp (a stage of rows copied to shared memory by 16-byte loads, the next stage's
# loads issued before the math; HALO_VK_MVQ8S=0 off), and hc_mix.comp (a workgroup per row:
# the streams read 25 times) against hc_mix1.comp (each value once; HALO_VK_HC_MIX1=0 off).
#   1. build; golden; ops tests of the changed kernels (q8_0 variants, matmul_multi, the rope
#      and SwiGLU loads, decode types, hc_pre/hc_post folds);
#   2. bench_vk_matvec, the Q8_0 shapes, 1 GB of copies in turn (cold), MVQ8S=0 (old), auto,
#      1/4/16 rows a workgroup;
#   3. the whole step, 8 layers tg64 -r 3, alternating old (both off) / new (defaults), two
#      rounds, then q8s alone (HC_MIX1=0);
#   4. per-dispatch stamps at 4 layers, old and new (shares, not speed).
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s9d1
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
left() { echo $((145 - ($(date +%s) - t0))); }
HALO_VK_TEST_ONLY=q8_0_decode,matmul_multi,decode_types,inverse_rope,moe_fusions,hyper,hc_post \
    CTEST_REGEX="vulkan_(golden|ops)" OUT=$out timeout 55 \
    scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in" \
    "$out/tests.log" | tail -6
grep -E "FAIL|failed checks" "$out/tests.log" | head -5
grep -E "mvq8=s(1|16) q8_0 \[4096 x 72\] x 1 |mvq8s=4|folded, hc_mix " "$out/tests.log" | head -4
grep -vE "^vulkan (stats|profile)" "$out/tests.log" | grep -E "^  |^ok|^FAIL" | gzip >"$final/tests.log.gz"
el "tests done"
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
[ -x $halo ] || { echo "no halo binary"; exit 1; }

# 2. the Q8_0 shapes cold
BENCH_VK_ONLY=attn_,ffn_,output,tiny BENCH_VK_NO_MOE=1 BENCH_VK_COLD_MB=1024 timeout 28 \
    stdbuf -oL build-vk-dev/bench/bench_vk_matvec 256 HALO_VK_MVQ8S=0 - HALO_VK_MVQ8S=1 \
    HALO_VK_MVQ8S=4 HALO_VK_MVQ8S=16 >"$final/ops.md" 2>"$out/ops.err"
echo "bench rc=$? (config, shape, MB, warm us, cold us, cold GB/s, rel err)"
awk -F'|' '$5 ~ /[0-9]/ && $3 !~ /f16|iq2|q2_K/ { printf "%-14s %-14.14s %7s %8s %8s %7s %s\n",
    $2, $3, $5, $6, $10, $11, $9 }' "$final/ops.md"
grep -i "error" "$out/ops.err" | head -3
el "bench done"

# 3. the whole step, 8 layers
tg() { # NAME ENV...
    local name=$1
    shift
    [ "$(left)" -gt 22 ] || { echo "$name: skipped (budget)"; return; }
    env HALO_VK_PROFILE=2 "$@" timeout 20 $halo bench --synthetic dsv4-flash-q2:8 \
        --backend vulkan --weights device -p 0 -n 64 -r 3 >"$out/tg-$name.md" 2>"$out/tg-$name.err"
    local rc=$? ts=$(grep -E "\| +tg64 " "$out/tg-$name.md" | awk -F'|' '{print $(NF-3)}')
    echo "$name ($*): rc=$rc tg64 $ts"
    grep "GPU busy" "$out/tg-$name.err" | tail -1 | cut -c15-150 | sed 's/^/    /'
    el "$name"
}
tg old1 HALO_VK_MVQ8S=0 HALO_VK_HC_MIX1=0
tg new1
tg old2 HALO_VK_MVQ8S=0 HALO_VK_HC_MIX1=0
tg new2
tg q8s HALO_VK_HC_MIX1=0
cp "$out"/tg-*.md "$final/" 2>/dev/null

# 4. stamps at 4 layers
for v in old new; do
    [ "$(left)" -gt 12 ] || { echo "prof4 $v: skipped (budget)"; continue; }
    env HALO_VK_PROFILE=1 $([ $v = old ] && echo HALO_VK_MVQ8S=0 HALO_VK_HC_MIX1=0) timeout 12 \
        $halo bench --synthetic dsv4-flash-q2:4 --backend vulkan --weights device -p 0 -n 16 \
        -r 1 >/dev/null 2>"$out/prof4-$v.err"
    echo "prof4 $v rc=$?"
    grep "vulkan profile: " "$out/prof4-$v.err" | tail -28 >"$final/prof4-$v.txt"
    grep -E "matvec_q8|hc_|matmul_multi" "$final/prof4-$v.txt" | head -7 | cut -c17-150
done
el "all done"
