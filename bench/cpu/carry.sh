#!/usr/bin/env bash
# Packs what bench/cpu/device.sh needs on the H200 machine into .carry/cpu/bin.tar.xz (~4 MB;
# device.sh unpacks it there): halo's bench binaries from this tree (built into BUILD, default
# build/), the Debian 12 libraries they link (libcjson, liburing), and a static llama.cpp
# v0.5.0 llama-bench (LLAMA_BENCH_STATIC, default /tmp/halo-bench/llama-bench-xeon).
#   bench/cpu/carry.sh [BUILD]
# The static llama-bench: GGML_NATIVE on the Xeon picks the AMX buffer type, which aborts on the
# deepseek4 graph (a GGML_ASSERT in the scheduler), so it is built with explicit AVX-512 flags
# and no AMX, from the source of tools/oracle/README.md step 1 (/tmp/llama.cpp), ~15 minutes at
# nice 19 on this busy 2-core VM:
#   cmake -S /tmp/llama.cpp -B /tmp/llbench-xeon -DCMAKE_BUILD_TYPE=Release \
#     -DBUILD_SHARED_LIBS=OFF \
#     -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
#     -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
#     -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_OPENSSL=OFF \
#     -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
#     -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DCMAKE_EXE_LINKER_FLAGS=-static
#   cmake --build /tmp/llbench-xeon -j2 --target llama-bench
# The last link fails on libgomp.so: rerun the command in
# tools/llama-bench/CMakeFiles/llama-bench.dir/link.txt with libgomp.a in its place, then strip.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
llama_bench=${LLAMA_BENCH_STATIC:-/tmp/halo-bench/llama-bench-xeon}
[ -x "$llama_bench" ] || { echo "carry.sh: no static llama-bench at $llama_bench" >&2; exit 1; }
[ -f "$build/CMakeCache.txt" ] || { make -s deps >/dev/null && cmake -S . -B "$build" >/dev/null; }
cmake --build "$build" -j2 --target bench_cpu bench_membw bench_make_medium bench_matvec >/dev/null
tmp=$(mktemp -d)
mkdir -p "$tmp/bin" "$tmp/lib" .carry/cpu
for b in bench_cpu bench_membw bench_make_medium bench_matvec; do
    cp "$build/bench/$b" "$tmp/bin/"
done
for l in libcjson.so.1 liburing.so.2; do cp -L "/lib/x86_64-linux-gnu/$l" "$tmp/lib/"; done
cp "$llama_bench" "$tmp/llama-bench"
tar cJf .carry/cpu/bin.tar.xz -C "$tmp" bin lib llama-bench
rm -rf "$tmp"
echo "packed .carry/cpu/bin.tar.xz ($(du -h .carry/cpu/bin.tar.xz | cut -f1)) from $build at" \
    "$(git rev-parse --short HEAD)"
