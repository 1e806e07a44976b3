# budget_s: 130
# Session 8, vulkan request 2 (run from a fresh main with the s8-vulkan overlay). Request 1 found
# every decode kernel 3-5x slower inside the engine's decode step than alone (bench_vk_matvec,
# warm or with 256 MB of cold copies): the routed IQ2_XXS gate/up 188 us a dispatch in the step
# against 42 alone, out_a/out_b 130 against 25-36, even rms_norm 24 us. The difference in scale:
# the step streams GiBs of weights (4 layers: 9 GiB) through host-visible VRAM (the BAR window);
# the bench touches <= 256 MB. Test: the weights in VRAM outside the BAR (HALO_VK_WEIGHT_MEM=
# staged), and GiBs in the bench.
#   1. build; tests: golden, engine (the staged weights' logits equal the mapped ones), hazard,
#      ops filtered to the new kernel variants (matvec_q8 q, matvec_moe PRE);
#   2. bench_vk_matvec, attn_output_b only, 256 copies (9 GB) in turn, mapped and staged (and
#      staged with four units in flight a lane, HALO_VK_MVQ8=4q);
#   3. 4 layers, tg128: defaults, WEIGHT_MEM=staged, DEVICE_MEM=staged (everything staged),
#      HALO_VK_MAX_BUFFER=256 MiB (many small buffers); SM clock sampled during the first;
#   4. the per-dispatch profile at 4 layers with the weights staged;
#   5. 8 layers, tg64, alternating: defaults against the weights staged (and + MOE_PRE).
# $OUT: summary.txt, ops.md, prof4s.txt, clocks.txt.
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s8r2
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
left() { echo $((126 - ($(date +%s) - t0))); }
HALO_VK_TEST_ONLY=q8_0_decode,moe_q2,decode_types \
    CTEST_REGEX="vulkan_(golden|engine|hazard|ops)" OUT=$out timeout 60 \
    scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in|weights staged" \
    "$out/tests.log" | tail -8
grep -E "FAIL|failed checks" "$out/tests.log" | head -5
el "tests done"
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
[ -x $halo ] || { echo "no halo binary"; exit 1; }

# 2. one projection over 9 GB of copies, mapped and staged
BENCH_VK_ONLY=attn_output_b BENCH_VK_NO_MOE=1 BENCH_VK_COLD_MB=9216 timeout 28 stdbuf -oL \
    build-vk-dev/bench/bench_vk_matvec 512 - HALO_VK_WEIGHT_MEM=staged \
    HALO_VK_WEIGHT_MEM=staged,HALO_VK_MVQ8=4q >"$final/ops.md" 2>"$out/ops.err"
echo "bench rc=$? (attn_output_b: warm us, 9 GB cold us, cold GB/s)"
awk -F'|' '$5 ~ /[0-9]/ { printf "  %-26s %8s %8s %8s\n", $2, $6, $10, $11 }' "$final/ops.md"
el "bench done"

# 3. 4 layers
tg() { # NAME LAYERS N ENV...
    local name=$1 L=$2 n=$3
    shift 3
    env HALO_VK_PROFILE=2 "$@" timeout 25 $halo bench --synthetic dsv4-flash-q2:$L \
        --backend vulkan --weights device -p 0 -n $n -r 3 >"$out/tg-$name.md" 2>"$out/tg-$name.err"
    local rc=$? ts=$(grep -E "\| +tg$n " "$out/tg-$name.md" | awk -F'|' '{print $(NF-3)}')
    echo "$name ($*): rc=$rc tg$n $ts"
    grep "GPU busy" "$out/tg-$name.err" | tail -1 | cut -c15-190 | sed 's/^/    /'
}
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv \
    -lms 200 >"$final/clocks.txt" 2>&1 &
smi=$!
tg def4 4 128
kill $smi 2>/dev/null
echo "SM clock during def4 (MHz, min/max of samples): $(awk -F', ' 'NR > 1 {print $2+0}' \
    "$final/clocks.txt" | sort -n | sed -n '1p;$p' | tr '\n' ' ')"
tg wstaged4 4 128 HALO_VK_WEIGHT_MEM=staged
tg dstaged4 4 128 HALO_VK_DEVICE_MEM=staged
tg smallbuf4 4 128 HALO_VK_MAX_BUFFER=268435456
el "4 layers done"

# 4. the per-dispatch profile with the weights staged
HALO_VK_PROFILE=1 HALO_VK_WEIGHT_MEM=staged timeout 20 $halo bench --synthetic \
    dsv4-flash-q2:4 --backend vulkan --weights device -p 0 -n 32 -r 1 >/dev/null \
    2>"$out/prof4s.err"
echo "prof4 staged rc=$?"
grep "vulkan profile: " "$out/prof4s.err" | tail -24 >"$final/prof4s.txt"
head -12 "$final/prof4s.txt" | cut -c17-150
el "profile done"

# 5. 8 layers, alternating
for round in 1 2; do
    [ "$(left)" -gt 24 ] || break
    tg def8r$round 8 64
    [ "$(left)" -gt 12 ] && tg wstaged8r$round 8 64 HALO_VK_WEIGHT_MEM=staged
    [ "$(left)" -gt 12 ] && tg wspre8r$round 8 64 HALO_VK_WEIGHT_MEM=staged HALO_VK_MOE_PRE=1
done
el "all done"
