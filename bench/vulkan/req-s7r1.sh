# budget_s: 150
# Session 7, vulkan request 1 (run from a fresh main with the s7-vulkan overlay). The decode
# shaders' weight bytes become floats under the exponent instead of by conversion instructions
# (HALO_VK_CVT, both matvec_q8.comp and matvec_moe.comp), and matvec_moe.comp loads several
# pieces a lane before using any (HALO_VK_MOE_UNROLL; HALO_VK_MOE_R=4: four rows a subgroup,
# off by default, timed alone here). Here: build, the Vulkan tests that cover
# these shaders on the H200 (golden: the whole forward of the q2 mix; ops filtered to the
# decode kernels' tests, at real shapes against the CPU; hazard, intdot), then
# bench_vk_matvec (each projection alone, against the CPU) in seven configurations (the last:
# the MoE's weighted sum not folded into the routed down), then halo alone on the 4- and
# 24-layer synthetic q2 models made in place, tg64, new and old, and
# a 4-layer per-op profile if time is left.
# $OUT gets summary.txt (this stdout), tests.log, ops.md; the rest stays in a work folder.
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s7r1
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
HALO_VK_TEST_ONLY=decodes,moe,q8_0 CTEST_REGEX="vulkan_(golden|ops|hazard|intdot)" OUT=$out \
    timeout 60 scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in" "$out/tests.log" |
    tail -8
{
    grep -E "Test +#|tests passed|tests failed|\(Failed\)|FAIL|^ *cvt=|failed checks" \
        "$out/tests.log" | tail -30
    echo "largest relative differences (ops):"
    grep -E " rel [0-9.e+-]+$" "$out/tests.log" | awk '{print $NF, $0}' | sort -g | tail -6
} >"$final/tests.log"
el "tests done"
prefix=/tmp/halo-vk-prefix
libs=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
[ -x $halo ] || { echo "no halo binary"; exit 1; }
old=HALO_VK_CVT=0,HALO_VK_MOE_UNROLL=1
timeout 34 stdbuf -oL build-vk-dev/bench/bench_vk_matvec 100 - $old HALO_VK_CVT=0 \
    HALO_VK_MOE_UNROLL=1 HALO_VK_MOE_UNROLL=4 HALO_VK_MOE_R=4 HALO_VK_FUSE_MOE=1 \
    >"$final/ops.md" 2>"$out/ops.err"
echo "bench_vk_matvec rc=$?"
grep -E "moe|iq2|q2_K|attn_q_b|output " "$final/ops.md" | cut -c1-150 | head -24
el "ops done"
run() { # NAME SECONDS ENV...
    local name=$1 lim=$2 # L: the layers
    shift 2
    env "$@" timeout "$lim" $halo bench --synthetic dsv4-flash-q2:$L --backend vulkan \
        --weights device -p 0 -n 64 -r $REPS >"$out/tg-$name.md" 2>"$out/tg-$name.err"
    local rc=$?
    local ts=$(grep -E "\| +tg64 " "$out/tg-$name.md" | awk -F'|' '{print $(NF-3)}')
    echo "$name ($*): rc=$rc tg64 $ts"
    grep "GPU busy" "$out/tg-$name.err" | tail -1 | cut -c1-200 | sed 's/^/    /'
}
L=4 REPS=5
run new4 15 HALO_VK_PROFILE=2
run old4 15 HALO_VK_PROFILE=2 HALO_VK_CVT=0 HALO_VK_MOE_UNROLL=1
el "4 layers"
L=24 REPS=2
left() { echo $((147 - ($(date +%s) - t0))); }
[ "$(left)" -gt 20 ] && run new24 $(( $(left) < 32 ? $(left) : 32 )) HALO_VK_PROFILE=2
[ "$(left)" -gt 20 ] && run old24 $(left) HALO_VK_PROFILE=2 HALO_VK_CVT=0 HALO_VK_MOE_UNROLL=1
if [ "$(left)" -gt 8 ]; then # the per-op profile with the new kernels, 4 layers, tg16
    HALO_VK_PROFILE=1 timeout $(left) $halo bench --synthetic dsv4-flash-q2:4 --backend vulkan \
        --weights device -p 0 -n 16 -r 1 >/dev/null 2>"$out/prof.err"
    grep "vulkan profile" -A 40 "$out/prof.err" | head -45 >"$final/prof4.txt"
fi
el "all done"
