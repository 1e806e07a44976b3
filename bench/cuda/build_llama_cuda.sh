#!/usr/bin/env bash
# llama.cpp v0.5.0's CUDA llama-bench for the H200 (sm_90 code only), built on the dev VM so the
# device's time goes to measuring: static ggml, dynamic cudart/cublas/cublasLt/nccl from the
# CUDA 13 toolkit (the H200 machine has the same toolkit). ~35 minutes at nice 19 on 2 busy
# cores; 48.6 MB stripped, 21.4 MB as xz, which fits the device tool's transfer only beside a
# working tree without the golden fixtures (bench/cuda/s7/slim.sh bench).
#   bench/cuda/build_llama_cuda.sh [SRC]   SRC: the v0.5.0 checkout (default /tmp/llama.cpp, from
#                                          the bundle in npm's node-llama-cpp@3.22.1; ORACLES.md)
# Output: .carry/llcuda/llama-bench-cuda.xz (bench/cuda/peer.sh runs it as LLAMA_BENCH).
# CPU flags are explicit (no GGML_NATIVE: this VM is a Zen 5, the device a Xeon whose AMX buffer
# type aborts deepseek4); with -ngl 99 the CPU backend does no work that matters here.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${1:-/tmp/llama.cpp}
x86="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
     -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
# shellcheck disable=SC2086
cmake -S "$src" -B "$src/build-cuda90" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=OFF -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90-real $x86 >/dev/null
nice -n 19 cmake --build "$src/build-cuda90" -j2 --target llama-bench
mkdir -p "$root/.carry/llcuda"
strip -o /tmp/llama-bench-cuda "$src/build-cuda90/bin/llama-bench"
xz -T2 -9 -c /tmp/llama-bench-cuda >"$root/.carry/llcuda/llama-bench-cuda.xz"
ls -la "$root/.carry/llcuda/llama-bench-cuda.xz"
