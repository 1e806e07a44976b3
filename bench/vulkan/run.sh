#!/usr/bin/env bash
# halo's Vulkan backend against llama.cpp v0.5.0's Vulkan backend on the H200 machine (the
# device tool), on the same GGUF in the same call sequence: pp512, pp2048 and tg64 at depth 0,
# pp2048 and tg64 at depth 24,576 (issue 15's benchmark). Not a test: speed claims come from
# here, as ratios, into bench/vulkan/RESULTS.md.
#
#   bench/vulkan/run.sh [LAYERS | MODEL.gguf]   (default 24 layers; run it again after a phase
#                                                 that timed out)
#
# Env: LLAMA_BENCH=path  a prebuilt llama-bench (llama.cpp v0.5.0 with GGML_VULKAN; its shared
#                        libraries found through its rpath or LD_LIBRARY_PATH): phase 3 runs it
#                        instead of building llama.cpp with the peer script;
#      DEBS=dir          the .deb files for phase 1 (default .carry/vk-slim/debs, else
#                        .carry/vulkan/debs);
#      DEPTH=0           skip the depth-24,576 tests (default: run them);
#      REPS=N            llama-bench's and halo's -r at depth 0 (default 2);
#      PROMPTS=LIST      the prefill lengths at depth 0 (default 512,2048);
#      ROUNDS=N          with LLAMA_BENCH: N-1 more rounds of both at depth 0 (phase 6).
# The last lines compare the two on every test both ran: t/s and halo / llama.cpp.
#
# Phases (each skipped when already done on a warm machine, so calls of <= 10 min add up):
#   1. halo with Vulkan: scripts/device-vulkan.sh unpacks the carried Debian .deb files (loader,
#      glvnd, glslc, headers), builds build-vk-dev/ and runs the placement test on the GPU.
#   2. the model: halo's synthetic DeepSeek V4 Flash q2 (real shapes, LAYERS layers) written to
#      /dev/shm with `halo bench --write-gguf`, so both programs read the same file.
#   3. llama.cpp's Vulkan numbers: LLAMA_BENCH's CSV on that file; without LLAMA_BENCH the peer
#      script (shared/peers/llamacpp_h200.sh, BACKEND=vulkan MODEL=that file) builds llama.cpp
#      in the background and prints tables ("build not finished: call again" means exactly
#      that; no ratios then).
#   4. halo bench --backend vulkan on the same file, same lengths, as CSV.
#   5. the comparison table (also $OUT/compare.md).
# With a prebuilt llama-bench and a model file already on the machine, e.g.:
#   LLAMA_BENCH=/path/llama-bench bench/vulkan/run.sh /dev/shm/model.gguf
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
arg=${1:-24}
reps=${REPS:-2}
prompts=${PROMPTS:-512,2048}
debs=${DEBS:-.carry/vk-slim/debs}
[ -d "$debs" ] || debs=.carry/vulkan/debs
out=${OUT:-/tmp/halo-out}
mkdir -p "$out"
t0=$(date +%s)
el() { echo "[+$(($(date +%s) - t0))s] $*"; }

# 1. halo, built with Vulkan (and the GPU checked) once per machine.
if [ ! -x build-vk-dev/src/cli/halo ] || [ ! -f /tmp/halo-vk-prefix/.bench-ready ]; then
    CTEST_REGEX=vulkan_placement HALO_VK_TEST_ALL=0 scripts/device-vulkan.sh "$debs" \
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

# 2. the model, once (or the one named).
if [ -f "$arg" ]; then
    model=$arg
else
    model=/dev/shm/halo-dsv4-q2-$arg.gguf
    if [ ! -f "$model" ]; then
        "$halo" bench --synthetic "dsv4-flash-q2:$arg" --write-gguf "$model.part" \
            >"$out/write-gguf.log" 2>&1 && mv "$model.part" "$model" ||
            { tail -20 "$out/write-gguf.log"; rm -f "$model.part"; exit 1; }
        el "model written: $(du -h "$model" | cut -f1)"
    fi
fi

# 3. llama.cpp's Vulkan tables: a prebuilt llama-bench, or llama.cpp built by the peer script.
if [ -n "${LLAMA_BENCH:-}" ]; then
    lb() { "$LLAMA_BENCH" -m "$model" -ngl 99 "$@" 2>>"$out/llamacpp-vulkan.err"; }
    if [ ! -f "$out/llamacpp-vulkan.csv" ]; then
        { lb -p "$prompts" -n 64 -r "$reps" -o csv
          [ "${DEPTH:-1}" = 0 ] || lb -p 2048 -n 64 -d 24576 -r 1 -o csv | grep -v "^build_commit"
        } >"$out/llamacpp-vulkan.csv.part" && mv "$out/llamacpp-vulkan.csv.part" "$out/llamacpp-vulkan.csv"
        # without a Vulkan device llama-bench silently runs on the CPU: show which it found
        grep -m2 -E "ggml_vulkan: [0-9]+ =|rror" "$out/llamacpp-vulkan.err"
    fi
    el "llama.cpp Vulkan done (prebuilt $LLAMA_BENCH)"
else
    # The peer script takes its .deb files as .carry/debs (glslc, shaderc, headers: unpacked
    # into /opt/vk) and .carry/gl (the loader and glvnd: unpacked into /); both are in
    # .carry/vulkan/debs.
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
    if [ ! -f "$out/llamacpp-vulkan.txt" ] ||
        ! grep -q "depth 24576 done" "$out/llamacpp-vulkan.txt"; then
        BACKEND=vulkan MODEL=$model bash "$peers/llamacpp_h200.sh" 2>&1 |
            tee "$out/llamacpp-vulkan.txt"
        grep -q "depth 24576 done" "$out/llamacpp-vulkan.txt" || exit 3
    fi
    el "llama.cpp Vulkan done (built by the peer script: tables only, no ratios)"
fi

# 4. halo on the same file, same lengths, as llama-bench's -r.
hb() { "$halo" bench -m "$model" --backend vulkan "$@" 2>"$out/halo-vulkan.err"; }
{ hb -p "$prompts" -n 64 -r "$reps" -o csv
  [ "${DEPTH:-1}" = 0 ] || hb -p 2048 -n 64 -d 24576 -r 1 -o csv | grep -v "^build_commit"
} >"$out/halo-vulkan.csv"
grep -E "rror" "$out/halo-vulkan.err" | head -5
el "halo done"

# 5. The comparison: each test (pp/tg and depth) both ran, t/s and the ratio.
[ -f "$out/llamacpp-vulkan.csv" ] || exit 0
compare() { awk -F'","|^"|"$' '
    # a plain header, then quoted fields (split on "," the first is empty); columns by name
    FNR == 1 { delete col; nh = split($0, h, ","); for (i = 1; i <= nh; i++) col[h[i]] = i + 1; next }
    !("avg_ts" in col) { next }
    {
        p = $col["n_prompt"]; g = $col["n_gen"]; d = $col["n_depth"] + 0
        key = (g > 0 ? "tg" g : "pp" p) (d ? " @ d" d : "")
        if (FILENAME ~ /llamacpp/) { lc[key] = $col["avg_ts"]; order[++n] = key }
        else halo[key] = $col["avg_ts"]
    }
    END {
        printf "| test | llama.cpp Vulkan t/s | halo Vulkan t/s | halo / llama.cpp |\n"
        printf "|---|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k in halo) printf "| %s | %.2f | %.2f | %.2fx |\n", k, lc[k], halo[k], halo[k] / lc[k]
            else printf "| %s | %.2f | - | - |\n", k, lc[k]
        }
    }' "$@"; }
compare "$out/llamacpp-vulkan.csv" "$out/halo-vulkan.csv" | tee "$out/compare.md"
el "both done: $out/llamacpp-vulkan.csv, $out/halo-vulkan.csv, $out/compare.md"

# 6. ROUNDS=N (a prebuilt llama-bench only): N-1 more rounds at depth 0, llama.cpp then halo
#    again on the same file, each compared on its own ($OUT/compare.rN.md). A peer's tg64 moved
#    from 92 to 73 t/s between two calls (bench/vulkan/RESULTS.md): the rounds show the spread.
for r in $(seq 2 "${ROUNDS:-1}"); do
    [ -n "${LLAMA_BENCH:-}" ] || break
    lb -p "$prompts" -n 64 -r "$reps" -o csv >"$out/llamacpp-vulkan.r$r.csv"
    hb -p "$prompts" -n 64 -r "$reps" -o csv >"$out/halo-vulkan.r$r.csv"
    echo "round $r:"
    compare "$out/llamacpp-vulkan.r$r.csv" "$out/halo-vulkan.r$r.csv" | tee "$out/compare.r$r.md"
    el "round $r done"
done
