#!/usr/bin/env bash
# halo's Vulkan backend against llama.cpp v0.5.0's Vulkan backend on the H200 machine (the
# device tool), on the same GGUF in the same call sequence: pp512, pp2048 and tg64 at depth 0,
# pp2048 and tg64 at depth 24,576 (issue 15's benchmark). Not a test: speed claims come from
# here, as ratios, into bench/vulkan/RESULTS.md.
#
#   bench/vulkan/run.sh [LAYERS]      (default 24; run it again after a phase that timed out)
#
# Phases (each skipped when already done on a warm machine, so calls of <= 10 min add up):
#   1. halo with Vulkan: scripts/device-vulkan.sh unpacks the carried Debian .deb files (loader,
#      glvnd, glslc, headers), builds build-vk-dev/ and runs the placement test on the GPU.
#   2. the model: halo's synthetic DeepSeek V4 Flash q2 (real shapes, LAYERS layers) written to
#      /dev/shm with `halo bench --write-gguf`, so both programs read the same file.
#   3. llama.cpp's Vulkan build and its llama-bench tables: the peer script
#      (shared/peers/llamacpp_h200.sh, BACKEND=vulkan MODEL=that file), which builds in the
#      background; "build not finished: call again" means exactly that.
#   4. halo bench --backend vulkan on the same file, same lengths.
#
# Carry (the device tool's `carry`): .carry/vulkan (scripts/device-vulkan.sh fetch, with
# spirv-headers for llama.cpp), .carry/llama.bundle (ORACLES.md §6), and the peer scripts as
# .carry/peers when the checkout has no shared/ folder beside it.
#   run(command="bench/vulkan/run.sh 24", carry=[".carry/vulkan", ".carry/llama.bundle",
#       ".carry/peers"], timeout_s=600)
# Memory: the file is in /dev/shm (host RAM). The engine places Vulkan by the plan, so on this
# discrete GPU the weights are read from the file straight into device buffers (no arena copy):
# host RAM holds the file once. 24 layers (~45 GiB) was chosen when the arena doubled it; the
# full 43-layer model (80.76 GiB) may now fit if /dev/shm allows it (tmpfs defaults to half of
# RAM); llama.cpp's full-size numbers are in ORACLES.md §6. Logs under $OUT (or /tmp/halo-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
R=$(pwd)
layers=${1:-24}
out=${OUT:-/tmp/halo-out}
mkdir -p "$out"
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }

# 1. halo, built with Vulkan (and the GPU checked) once per machine.
if [ ! -x build-vk-dev/src/cli/halo ] || [ ! -f /tmp/halo-vk-prefix/.bench-ready ]; then
    CTEST_REGEX=vulkan_placement HALO_VK_TEST_ALL=0 scripts/device-vulkan.sh .carry/vulkan/debs \
        >"$out/halo-build.log" 2>&1 || { tail -30 "$out/halo-build.log"; exit 1; }
    touch /tmp/halo-vk-prefix/.bench-ready
    el "halo built with Vulkan; placement test passed on the GPU"
fi
libs=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
halo=$R/build-vk-dev/src/cli/halo

# 2. the model, once.
model=/dev/shm/halo-dsv4-q2-$layers.gguf
if [ ! -f "$model" ]; then
    "$halo" bench --synthetic "dsv4-flash-q2:$layers" --write-gguf "$model.part" \
        >"$out/write-gguf.log" 2>&1 && mv "$model.part" "$model" ||
        { tail -20 "$out/write-gguf.log"; rm -f "$model.part"; exit 1; }
    el "model written: $(du -h "$model" | cut -f1)"
fi

# 3. llama.cpp's Vulkan build and its tables. The peer script takes its .deb files as
# .carry/debs (glslc, shaderc, headers: unpacked into /opt/vk) and .carry/gl (the loader and
# glvnd: unpacked into /); both are in .carry/vulkan/debs.
peers=${PEERS:-}
for d in shared/peers ../shared/peers .carry/peers; do
    [ -z "$peers" ] && [ -f "$d/llamacpp_h200.sh" ] && peers=$d
done
[ -n "$peers" ] || { echo "run.sh: no llamacpp_h200.sh (carry .carry/peers)"; exit 1; }
mkdir -p .carry/debs .carry/gl
for p in glslc libshaderc1 libvulkan-dev spirv-headers; do
    cp -n .carry/vulkan/debs/prefix/${p}_*.deb .carry/debs/ 2>/dev/null
done
cp -n .carry/vulkan/debs/root/*.deb .carry/gl/ 2>/dev/null
ls .carry/debs/spirv-headers_*.deb >/dev/null 2>&1 ||
    echo "run.sh: no spirv-headers .deb carried: llama.cpp's Vulkan build may not configure"
if [ ! -f "$out/llamacpp-vulkan.txt" ] || ! grep -q "depth 24576 done" "$out/llamacpp-vulkan.txt"; then
    BACKEND=vulkan MODEL=$model bash "$peers/llamacpp_h200.sh" 2>&1 | tee "$out/llamacpp-vulkan.txt"
    grep -q "depth 24576 done" "$out/llamacpp-vulkan.txt" || exit 3
fi
el "llama.cpp Vulkan done"

# 4. halo on the same file, same lengths, as llama-bench's -r.
{
    echo "== halo bench --backend vulkan, $model"
    "$halo" bench -m "$model" --backend vulkan -p 512,2048 -n 64 -r 2 -o md 2>&1 |
        grep -E "^\||rror|loaded"
    el "halo depth 0 done"
    "$halo" bench -m "$model" --backend vulkan -p 2048 -n 64 -d 24576 -r 1 -o md 2>&1 |
        grep -E "^\||rror|loaded"
    el "halo depth 24576 done"
} | tee "$out/halo-vulkan.txt"
el "both done: $out/llamacpp-vulkan.txt and $out/halo-vulkan.txt"
