# budget_s: 130
# Session 8, vulkan request 1 (run from a fresh main with the s8-vulkan overlay): where a decode
# step's GPU time goes, first the MoE stage, whose time session 7 saw bimodal (158-184 or
# 503-597 us for the same call). Here:
#   1. build; the golden test (the whole forward on the GPU; the profile code is off there);
#   2. bench_vk_matvec: each projection warm and cold (256 MB of copies in turn; matvec_q8's
#      variants, new: q, four units in flight a lane), then the MoE
#      call only, warm (one input: the same 6 experts every call, mostly
#      in L2) and cold (16 inputs in turn: other experts each call, from memory as in decode),
#      three passes each, in the defaults, with per-dispatch stamps (HALO_VK_PROFILE=1, now with
#      percentiles: which dispatch is slow) and with the knobs that change the MoE kernels or
#      the memory they read (new: HALO_VK_MOE_PRE=1, the first weight loads ahead of barriers);
#   3. halo's decode step at 4 layers with HALO_VK_PROFILE=1 (per-dispatch percentiles: is the
#      routed experts' dispatch bimodal inside a real step?);
#   4. A/B at 4 layers (tg128, alternating, two rounds): defaults against the barriers that
#      always wait for transfers (HALO_VK_BARRIER_XFER=1, as before) and against dedicated
#      allocations for large buffers (HALO_VK_DEDICATED=1);
#   5. llama.cpp v0.5.0 Vulkan on a 4-layer GGUF with GGML_VK_PERF_LOGGER=1 (its per-op GPU
#      times, if this build has the logger), and halo on the same file (tg64, PROFILE=2).
# $OUT: summary.txt (this stdout), moe.md, prof4.txt, llama-perf.txt, tests.log.
set -u
final=${OUT:-/tmp/halo-out}
out=/tmp/vk-s8r1
mkdir -p "$final" "$out"
exec > >(tee "$final/summary.txt") 2>&1
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }
left() { echo $((126 - ($(date +%s) - t0))); }
CTEST_REGEX="vulkan_(golden|hazard)" OUT=$out timeout 50 scripts/device-vulkan.sh .carry/vulkan/debs \
    >"$out/tests.log" 2>&1
echo "tests rc=$?"
grep -E "tests passed|tests failed|\(Failed\)|Passed +[0-9.]+ sec|built in" "$out/tests.log" |
    tail -4 | tee "$final/tests.log"
el "tests done"
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=build-vk-dev/src/cli/halo
[ -x $halo ] || { echo "no halo binary"; exit 1; }

# 2. each projection alone, warm (one weight repeated: <= 50 MB stays in L2) and cold (256 MB of
#    copies in turn: from memory, as in a decode step); then the MoE call alone
BENCH_VK_NO_MOE=1 timeout 28 stdbuf -oL build-vk-dev/bench/bench_vk_matvec 100 - \
    HALO_VK_MVQ8=1u HALO_VK_MVQ8=2u HALO_VK_MVQ8=1w HALO_VK_MVQ8=4q HALO_VK_MVQ8=1q >"$final/ops.md" 2>"$out/ops.err"
echo "bench_vk_matvec (projections) rc=$?"
echo "projection: warm us, cold us (cold GB/s), by config"
awk -F'|' '$5 ~ /[0-9]/ && $3 !~ /moe/ && $3 !~ /^ output |tiny|f16|plain/ {
        printf "  %-18s %-24s %8s %8s (%s)\n", $2, $3, $6, $10, $11 }' \
    "$final/ops.md" | sed 's/   */ /g'
BENCH_VK_MOE_ONLY=1 BENCH_VK_MOE_PASSES=3 timeout 34 stdbuf -oL \
    build-vk-dev/bench/bench_vk_matvec 100 - HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=warm \
    HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold HALO_VK_MOE_UNROLL=4 HALO_VK_MVMOE=4 \
    HALO_VK_FUSE_MOE=1 HALO_VK_DEVICE_MEM=staged HALO_VK_DEDICATED=1 HALO_VK_MOE_PRE=1 \
    HALO_VK_MOE_PRE=1,HALO_VK_MOE_UNROLL=4 - >"$final/moe.md" 2>"$out/moe.err"
echo "bench_vk_matvec rc=$?"
grep -E "^vulkan profile: moe|^bench_vk_matvec: config HALO_VK_PROFILE" "$out/moe.err" |
    sed 's/^vulkan profile: //' >>"$final/moe.md"
echo "us a MoE call by config, each pass: w(arm: one input) c(old: 16 inputs in turn)"
awk -F'|' '/moe,/ { c = $2; v = $6; gsub(/ /, "", v); gsub(/^ +| +$/, "", c)
        if (!(c in a)) o[++n] = c; a[c] = a[c] " " ($3 ~ /in turn/ ? "c" : "w") v }
    END { for (i = 1; i <= n; i++) printf "  %-26s%s\n", o[i], a[o[i]] }' "$final/moe.md"
grep -E "^vulkan profile: moe|^bench_vk_matvec: config HALO_VK_PROFILE" "$out/moe.err" |
    sed 's/^vulkan profile: //' | cut -c1-130
el "moe done"

# 3. a real decode step, 4 layers, per-dispatch stamps
HALO_VK_PROFILE=1 timeout 20 $halo bench --synthetic dsv4-flash-q2:4 --backend vulkan \
    --weights device -p 0 -n 32 -r 1 >/dev/null 2>"$out/prof4.err"
echo "prof4 rc=$?"
grep "vulkan " "$out/prof4.err" | head -60 >"$final/prof4.txt"
head -24 "$final/prof4.txt" | cut -c17-150
el "profile done"

# 4. A/B at 4 layers
ab() { # NAME ENV...
    local name=$1
    shift
    env HALO_VK_PROFILE=2 "$@" timeout 15 $halo bench --synthetic dsv4-flash-q2:4 \
        --backend vulkan --weights device -p 0 -n 128 -r 3 >"$out/ab-$name.md" 2>"$out/ab-$name.err"
    local rc=$? ts=$(grep -E "\| +tg128 " "$out/ab-$name.md" | awk -F'|' '{print $(NF-3)}')
    echo "$name: rc=$rc tg128 $ts"
    grep "GPU busy" "$out/ab-$name.err" | tail -1 | cut -c15-190 | sed 's/^/    /'
}
abround() {
    ab def$1
    ab xfer$1 HALO_VK_BARRIER_XFER=1
    ab ded$1 HALO_VK_DEDICATED=1
    el "A/B round $1 done"
}
[ "$(left)" -gt 20 ] && abround 1

# 5. llama.cpp's per-op times on a 4-layer GGUF, and halo on the same file
m=/dev/shm/halo-dsv4-q2-4.gguf
if [ "$(left)" -gt 38 ]; then
    timeout 20 $halo bench --synthetic dsv4-flash-q2:4 --write-gguf $m.part >"$out/wg.log" 2>&1 &&
        mv $m.part $m
    el "4-layer gguf: $(du -h $m 2>/dev/null | cut -f1)"
    xz -dc .carry/llvk/llama-bench.xz >/tmp/llama-bench-vk && chmod +x /tmp/llama-bench-vk
    logger=$(grep -c GGML_VK_PERF_LOGGER /tmp/llama-bench-vk)
    echo "perf logger in this llama-bench: $logger"
    if [ "$logger" -gt 0 ]; then
        GGML_VK_PERF_LOGGER=1 LD_LIBRARY_PATH=.carry/llvk:$LD_LIBRARY_PATH timeout 25 \
            /tmp/llama-bench-vk -m $m -ngl 99 -p 0 -n 16 -r 1 >"$out/llama4.md" 2>"$out/llama4.err"
        echo "llama rc=$?"
        grep -E "tg16" "$out/llama4.md" | sed 's/  */ /g'
        # the logger prints a table per graph: keep the last ones
        tail -120 "$out/llama4.err" >"$final/llama-perf.txt"
        grep -iE "MUL_MAT|total" "$out/llama4.err" | tail -16 | cut -c1-150
    fi
    LD_LIBRARY_PATH=.carry/llvk:$LD_LIBRARY_PATH timeout 20 \
        /tmp/llama-bench-vk -m $m -ngl 99 -p 0 -n 64 -r 3 2>/dev/null | grep tg64 | sed 's/  */ /g'
    HALO_VK_PROFILE=2 timeout 15 $halo bench -m $m --backend vulkan -p 0 -n 64 -r 3 \
        >"$out/h4.md" 2>"$out/h4.err"
    grep tg64 "$out/h4.md" | sed 's/  */ /g'
    grep "GPU busy" "$out/h4.err" | tail -1 | cut -c1-200
    rm -f $m $m.part
    el "llama.cpp 4 layers done"
fi

rm -f /dev/shm/halo-dsv4-q2-4.gguf*
[ "$(left)" -gt 18 ] && abround 2
el "all done"
