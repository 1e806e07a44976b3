# budget_s: 150
# Session 6, vulkan request 1 (run from a fresh main with the s6-vulkan overlay): build with
# Vulkan and run the Vulkan tests on the H200 (ops, golden, hazard, engine, split, intdot), then
# halo alone on the 4-layer synthetic q2 model (real shapes, made in place), tg64 from depth 0,
# with this session's switches on (the defaults: HALO_VK_FUSE_MOE=2, HALO_VK_DEFER_NORM=1) and
# off, alternating, each with HALO_VK_PROFILE=2's totals, and one run with the per-op profile.
# Results come back in at most 8 files: logs go to a work folder, and $OUT gets summary.txt
# (this script's stdout), tests.log (the ctest lines and the fused ops' lines) and prof4.txt.
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s6r1
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
CTEST_REGEX="vulkan_(ops|golden|hazard|engine|split|intdot)" OUT=$out \
    timeout 85 scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in" "$out/tests.log" |
    tail -9
{
    grep -E "Test +#|tests passed|tests failed|\(Failed\)|FAIL" "$out/tests.log" | tail -30
    grep -E "moe fuse=|norm \+ moe|norm\+rope|barriers:" "$out/tests.log" | head -30
    echo "largest relative differences (ops):"
    grep -E " rel [0-9.e+-]+$" "$out/tests.log" | awk '{print $NF, $0}' | sort -g | tail -5
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
run() { # NAME SECONDS N ENV...
    local name=$1 lim=$2 n=$3
    shift 3
    env "$@" timeout "$lim" $halo bench --synthetic dsv4-flash-q2:4 --backend vulkan \
        --weights device -p 0 -n "$n" -r 3 >"$out/tg-$name.md" 2>"$out/tg-$name.err"
    local rc=$?
    local ts=$(grep -E "\| +tg$n " "$out/tg-$name.md" | awk -F'|' '{print $(NF-3)}')
    echo "$name ($*): rc=$rc tg$n $ts"
    grep "vulkan stats" "$out/tg-$name.err" | tail -2 | sed 's/^/    /'
}
new=(HALO_VK_PROFILE=2)
old=(HALO_VK_PROFILE=2 HALO_VK_FUSE_MOE=0 HALO_VK_DEFER_NORM=0)
run new1 25 64 "${new[@]}"
run old1 20 64 "${old[@]}"
el "round 1"
run prof 20 16 HALO_VK_PROFILE=1
grep "vulkan profile" "$out/tg-prof.err" | head -40 >"$final/prof4.txt"
el "profile"
run new2 20 64 "${new[@]}"
run old2 20 64 "${old[@]}"
el "round 2"
# Session 5's switches (never measured on the GPU), if time is left: all four off.
run s5off 20 64 "${old[@]}" HALO_VK_DSCACHE=0 HALO_VK_FUSE_NORM=0
el "all done"
