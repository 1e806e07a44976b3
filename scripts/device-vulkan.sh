#!/usr/bin/env bash
# The Vulkan backend on a GPU machine that has a Vulkan driver but no loader, no glslc and no
# package registry (the H200 machine: NVIDIA's driver and ICD under /usr/local/nvidia). Debian
# 12 .deb files are carried: the Vulkan loader and the glvnd libraries NVIDIA's ICD needs are
# unpacked into / (as the device notes say: unpacking other packages there can break it), and
# glslc, the Vulkan headers and the libraries halo links (cJSON, PCRE2, libedit, pkg-config)
# into a private prefix. Then halo is built with -DHALO_VULKAN=ON (no CUDA) into build-vk-dev/
# and the Vulkan tests run on the GPU: op by op against the CPU backend at DeepSeek V4 Flash
# shapes, and every golden model and sequence through the whole forward.
#
#   scripts/device-vulkan.sh fetch [DIR]   on a machine with apt: download the .deb files to DIR
#                                           (default .carry/vulkan/debs, ~12 MB; with
#                                           spirv-headers, for llama.cpp's Vulkan build:
#                                           bench/vulkan/run.sh)
#   scripts/device-vulkan.sh [DIR]         on the GPU machine: unpack, build, test; logs in $OUT
#                                           (or /tmp/halo-out)
#
# From the lead's checkout (the device tool carries the working tree plus named ignored paths):
#   echo /.carry/ >> .git/info/exclude; scripts/device-vulkan.sh fetch
#   run(command="scripts/device-vulkan.sh", carry=[".carry/vulkan"], timeout_s=600)
# Env: HALO_VK_TEST_ALL=1 (default here: the GPU is fast) runs every golden sequence;
# VK_DRIVER_FILES overrides the ICD; CTEST_REGEX (default vulkan) picks the tests; VK_BENCH="ARGS"
# then runs `halo bench ARGS --backend vulkan` once (e.g. VK_BENCH="--synthetic dsv4-flash-q2:4
# -p 512 -n 64 -r 2 -o md").
set -uo pipefail
cd "$(dirname "$0")/.."
root_pkgs=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
prefix_pkgs=(libvulkan-dev glslc libshaderc1
             libcjson-dev libcjson1 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0
             libpcre2-posix3 libedit-dev libedit2 libbsd0 libmd0 libtinfo6 libncurses-dev
             libncurses6 libncursesw6 libbsd-dev libmd-dev pkgconf pkgconf-bin libpkgconf3
             pkg-config libmicrohttpd-dev libmicrohttpd12 libgnutls30 libp11-kit0 libidn2-0
             libunistring2 libtasn1-6 libnettle8 libhogweed6 libgmp10 libffi8 libxxhash-dev
             libxxhash0 spirv-headers)
if [ "${1:-}" = fetch ]; then
    dir=${2:-.carry/vulkan/debs}
    mkdir -p "$dir/root" "$dir/prefix"
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64'
    (cd "$dir/root" && apt-get $o download "${root_pkgs[@]}" >/dev/null) || exit 1
    (cd "$dir/prefix" && apt-get $o download "${prefix_pkgs[@]}" >/dev/null) || exit 1
    du -sh "$dir"
    exit 0
fi
debs=${1:-.carry/vulkan/debs}
out=${OUT:-/tmp/halo-out}
mkdir -p "$out"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
    for f in "$debs"/root/*.deb; do dpkg -x "$f" /; done
    ldconfig
    prefix=/tmp/halo-vk-prefix
    mkdir -p "$prefix"
    for f in "$debs"/prefix/*.deb; do dpkg -x "$f" "$prefix"; done
    lib=$prefix/usr/lib/x86_64-linux-gnu
    libs=$lib:$prefix/lib/x86_64-linux-gnu
    # The prefix's libraries are only for glslc, the link and the tests, not for the machine's
    # own tools (older Debian libraries could shadow theirs).
    mkdir -p "$prefix/bin"
    for tool in glslc pkgconf; do
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$prefix/usr/bin/$tool" \
            >"$prefix/bin/$tool"
        chmod +x "$prefix/bin/$tool"
    done
    export PATH=$prefix/bin:$PATH
    export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
    export PKG_CONFIG_SYSROOT_DIR=$prefix
    # libmicrohttpd's .pc names gnutls privately; its development files are not carried.
    # (empty Libs, as scripts/device-setup.sh: libmicrohttpd's DT_NEEDED finds the system's)
    [ -f "$lib/pkgconfig/gnutls.pc" ] ||
        printf 'Name: gnutls\nDescription: stub\nVersion: 3.7.9\nLibs:\nCflags:\n' \
            >"$lib/pkgconfig/gnutls.pc"
    if [ -z "${VK_DRIVER_FILES:-}" ]; then
        for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
                   /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
            [ -f "$icd" ] && export VK_DRIVER_FILES=$icd && break
        done
    fi
    # (an empty VK_ICD_FILENAMES would hide every driver)
    [ -n "${VK_DRIVER_FILES:-}" ] && export VK_ICD_FILENAMES=$VK_DRIVER_FILES
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    echo "ICD: ${VK_DRIVER_FILES:-none found}; glslc: $(glslc --version 2>&1 | head -1)"
    pc=$(command -v pkg-config || echo "$prefix/bin/pkgconf")
    start=$(date +%s)
    cmake -S . -B build-vk-dev -DHALO_VULKAN=ON -DHALO_WERROR=OFF -DPKG_CONFIG_EXECUTABLE="$pc" \
        -DHALO_GLSLC="$prefix/bin/glslc" -DCMAKE_PREFIX_PATH="$prefix/usr" \
        -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$lib -Wl,-rpath,$lib" \
        >"$out/configure.log" 2>&1 ||
        { tail -30 "$out/configure.log"; exit 1; }
    cmake --build build-vk-dev -j "$(nproc)" >"$out/build.log" 2>&1 ||
        { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
    echo "built in $(($(date +%s) - start)) s"
    export LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}
    export HALO_VK_TEST_ALL=${HALO_VK_TEST_ALL:-1}
    cd build-vk-dev
    ctest --output-on-failure -R "${CTEST_REGEX:-vulkan}" -V
    tests=$?
    # One halo bench on the GPU after the tests (VK_BENCH: its arguments, --backend vulkan added).
    if [ -n "${VK_BENCH:-}" ]; then
        echo "== halo bench $VK_BENCH --backend vulkan"
        # shellcheck disable=SC2086
        src/cli/halo bench $VK_BENCH --backend vulkan 2>&1 | grep -vE "^(loading|\[)" | tail -40
    fi
    exit "$tests"
} 2>&1 | tee "$out/vulkan.log"
rc=${PIPESTATUS[0]}
# A test that finds no usable device skips (exit 77), which ctest counts as passing: not here.
if grep -q "skipped: " "$out/vulkan.log"; then
    echo "device-vulkan: the Vulkan tests skipped: no usable Vulkan device (see above)"
    exit 1
fi
exit "$rc"
