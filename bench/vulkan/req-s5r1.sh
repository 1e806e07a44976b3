# timeout_s: 590
# Session 5, vulkan request 1: build; Vulkan ops, hazard and golden (sampled) tests on the H200;
# then halo alone on the 24-layer q2 GGUF, tg64 from depth 0, with the descriptor-set cache and
# the folded norm on and off (alternating), each run with HALO_VK_PROFILE=2's totals.
set -u
tar xf .carry/vulkan/tree.tar
out=${OUT:-/tmp/halo-out}; mkdir -p "$out"
t0=$(date +%s); el() { echo "[+$(($(date +%s) - t0))s] $*"; }
CTEST_REGEX="vulkan_(ops|hazard|golden)" HALO_VK_TEST_ALL=0 OUT=$out \
    scripts/device-vulkan.sh .carry/vulkan/debs >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|Failed|\(Failed\)|Passed +[0-9]|built in" "$out/tests.log" | tail -8
grep -E "multi|\+norm" "$out/tests.log" | sort -k6 -g | tail -3
el "tests done"
mkdir -p /tmp/halo-vk-prefix && touch /tmp/halo-vk-prefix/.bench-ready
libs=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
model=/dev/shm/halo-dsv4-q2-24.gguf
[ -f $model ] || { $halo bench --synthetic dsv4-flash-q2:24 --write-gguf $model.part >"$out/write.log" 2>&1 && mv $model.part $model; }
el "model: $(du -h $model | cut -f1)"
run() { # NAME ENV...
    local name=$1; shift
    env "$@" HALO_VK_PROFILE=2 $halo bench -m $model --backend vulkan -p 0 -n 64 -r 2 -o csv \
        >"$out/tg-$name.csv" 2>"$out/tg-$name.err"
    local ts=$(awk -F'","|^"|"$' 'NR==1{for(i=1;i<=split($0,h,",");i++) c[h[i]]=i+1; next} {print $c["avg_ts"] " ± " $c["stddev_ts"]}' "$out/tg-$name.csv")
    echo "$name ($*): tg64 $ts"
    grep "vulkan stats" "$out/tg-$name.err" | sed 's/^/    /'
}
run both HALO_VK_DSCACHE=1 HALO_VK_FUSE_NORM=1
run none HALO_VK_DSCACHE=0 HALO_VK_FUSE_NORM=0
run dsc HALO_VK_DSCACHE=1 HALO_VK_FUSE_NORM=0
run fuse HALO_VK_DSCACHE=0 HALO_VK_FUSE_NORM=1
el "round 1 done"
run both2 HALO_VK_DSCACHE=1 HALO_VK_FUSE_NORM=1
run none2 HALO_VK_DSCACHE=0 HALO_VK_FUSE_NORM=0
el "round 2 done"
run both-md64 HALO_VK_MAX_DISPATCH=64
el "all done"
