# budget_s: 125
# Session 10, vk-q8q request 3 (a copy of main with the s10-vk-q8q overlay): matvec_q8i.comp,
# fast mode's Q8_0 decode projections on int8 activations quantized inside each workgroup
# (HALO_VK_MVQ8I=1; =0 the f32 matvec_q8.comp as before, the default until this says otherwise).
# After request 1 and call 3: the quantization's divisions in integers (exact everywhere), the
# WIDE variant, and HALO_VK_MVQ8I=1 now only the projections of 32 Mi weights or more.
#   1. build; test_vulkan_intdot (every variant incl. s and w, the folds, the selection);
#   2. bench_vk_matvec, the Q8_0 decode shapes, fast mode, cold: MVQ8I=0, 1, all, 1pw;
#   3. the whole step, 8 layers tg64 -r 3, 1 / 0 / 1 / 0.
# $OUT: summary.txt, ops.md, tests.log.gz, tg-*.md
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s10q8q3
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
left() { echo $((121 - ($(date +%s) - t0))); }
CTEST_REGEX="vulkan_intdot" OUT=$out timeout 48 \
    scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in" \
    "$out/tests.log" | tail -6
grep -E "FAIL|failed checks|worst at" "$out/tests.log" | head -8
grep -E "^[0-9]+:   (q_a|q_b|out_b|output|norm|rope|moe)" "$out/tests.log" | cut -c1-150 | head -10
grep -vE "^vulkan (stats|profile)" "$out/tests.log" | grep -E "^[0-9]*:? *(  |ok|FAIL)" | gzip >"$final/tests.log.gz"
el "tests done"
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
[ -x $halo ] || { echo "no halo binary"; exit 1; }

# 2. the Q8_0 shapes, fast mode (rel err is against the precise CPU: ~1e-2 on the int path)
F=HALO_VK_FAST=1
BENCH_VK_ONLY=attn_,ffn_,output,tiny BENCH_VK_NO_MOE=1 BENCH_VK_COLD_MB=1024 timeout 30 \
    stdbuf -oL build-vk-dev/bench/bench_vk_matvec 256 $F,HALO_VK_MVQ8I=0 $F,HALO_VK_MVQ8I=1 \
    $F,HALO_VK_MVQ8I=all $F,HALO_VK_MVQ8I=1pw >"$final/ops.md" 2>"$out/ops.err"
echo "bench rc=$? (config, shape, MB, warm us, cold us, cold GB/s, rel err)"
awk -F'|' '$5 ~ /[0-9]/ && $3 !~ /f16|iq2|q2_K/ { printf "%-30.30s %-14.14s %7s %8s %8s %7s %s\n",
    $2, $3, $5, $6, $10, $11, $9 }' "$final/ops.md"
grep -i "error" "$out/ops.err" | head -3
el "bench done"

# 3. the whole step, 8 layers, alternating
tg() { # NAME ENV...
    local name=$1
    shift
    [ "$(left)" -gt 16 ] || { echo "$name: skipped (budget)"; return; }
    env HALO_VK_PROFILE=2 "$@" timeout 16 $halo bench --synthetic dsv4-flash-q2:8 \
        --backend vulkan --weights device -p 0 -n 64 -r 3 >"$out/tg-$name.md" 2>"$out/tg-$name.err"
    local rc=$? ts=$(grep -E "\| +tg64 " "$out/tg-$name.md" | awk -F'|' '{print $(NF-3)}')
    echo "$name ($*): rc=$rc tg64 $ts"
    grep "GPU busy" "$out/tg-$name.err" | tail -1 | cut -c15-170 | sed 's/^/    /'
    el "$name"
}
tg new1 HALO_VK_MVQ8I=1
tg old1 HALO_VK_MVQ8I=0
tg new2 HALO_VK_MVQ8I=1
tg old2 HALO_VK_MVQ8I=0
cp "$out"/tg-*.md "$final/" 2>/dev/null
el "all done"
