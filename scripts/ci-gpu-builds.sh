#!/usr/bin/env bash
# CI's GPU part, on a machine without a GPU: the CUDA backend compiled for every target
# architecture with warnings as errors, and the CUDA-built binaries running the whole suite
# (the GPU tests skip with one line, everything else runs on the CPU); the same sources built
# as HIP with Debian's hipcc, warnings as errors. nvcc is NVIDIA's (/usr/local/cuda): when it is
# missing the CUDA build is not checked, and this says so loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; } || true
if [ -n "$nvcc" ]; then
    echo "== CUDA build ($("$nvcc" --version | tail -1))"
    cmake -S . -B build-cuda -DHALO_CUDA=ON -DHALO_WERROR=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
        >/dev/null
    cmake --build build-cuda -j "$jobs"
    # test_cli_bench expects a backend this build has but this machine cannot start to say
    # "not built"; the CPU build runs it.
    (cd build-cuda && ctest --output-on-failure -j "$jobs" -E '^test_cli_bench$')
else
    echo "######################################################################"
    echo "## CI: nvcc not found (PATH, /usr/local/cuda): the CUDA build is NOT ##"
    echo "## checked on this machine.                                          ##"
    echo "######################################################################"
fi
if command -v hipcc >/dev/null; then
    echo "== HIP build ($(dpkg-query -W -f='hipcc ${Version}' hipcc 2>/dev/null || echo hipcc))"
    cmake -S . -B build-hip -DHALO_HIP=ON -DHALO_WERROR=ON >/dev/null
    cmake --build build-hip -j "$jobs"
    build-hip/tests/backend/test_backend_cuda_ops || [ $? = 77 ]
else
    echo "## CI: hipcc not found (scripts/deps.sh gpu installs it): HIP build NOT checked ##"
    exit 1
fi
