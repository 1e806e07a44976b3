#!/usr/bin/env bash
# Builds halo with CUDA on a GPU machine that has nvcc and cmake but no package registry (the
# H200 machine of docs/cuda.md). The libraries halo links (cJSON, PCRE2, libedit) and pkg-config
# come as Debian 12 .deb files, unpacked into a private prefix: a minute at most.
#
#   scripts/device-setup.sh fetch [DIR]   on a machine with apt: download the .deb files to DIR
#                                          (default .carry/cuda/debs)
#   scripts/device-setup.sh [DIR]         on the GPU machine: unpack them, configure and build
#                                          build-gpu/ (sm_90 only unless HALO_CUDA_ARCHS is set)
#
# Warnings are not errors here: the machine's compiler is not the one CI checks with.
# Afterwards `source build-gpu/env.sh` sets the library path for running the binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the build and the binaries need (the device tool carries at most 64 MiB in all).
pkgs=(libcjson-dev libcjson1 libpcre2-dev libpcre2-8-0 libedit-dev libedit2 libbsd0 libmd0
      libtinfo6 libmicrohttpd-dev libmicrohttpd12 pkgconf pkgconf-bin libpkgconf3 pkg-config)
if [ "${1:-}" = fetch ]; then
    dir=${2:-.carry/cuda/debs}
    mkdir -p "$dir"
    (cd "$dir" && apt-get download "${pkgs[@]}" >/dev/null)
    du -sh "$dir"
    exit 0
fi
debs=${1:-.carry/cuda/debs}
prefix=/tmp/halo-prefix
mkdir -p "$prefix"
for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
lib=$prefix/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$prefix
# libmicrohttpd.pc names gnutls privately; the shared library links without its headers, so a
# machine without gnutls' .pc gets an empty stand-in (the runtime library is the system's).
if ! PKG_CONFIG_PATH= pkg-config --exists gnutls 2>/dev/null && [ ! -f "$lib/pkgconfig/gnutls.pc" ]; then
    printf 'Name: gnutls\nDescription: stand-in\nVersion: 3.7.9\nLibs:\nCflags:\n' \
        >"$lib/pkgconfig/gnutls.pc"
fi
pc=$(command -v pkg-config || true)
[ -n "$pc" ] || pc=$prefix/usr/bin/pkgconf
mkdir -p build-gpu
cat >build-gpu/env.sh <<ENV
export LD_LIBRARY_PATH=$lib:$prefix/lib/x86_64-linux-gnu:\${LD_LIBRARY_PATH:-}
ENV
cmake -S . -B build-gpu -DHALO_CUDA=ON -DHALO_WERROR=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${HALO_CUDA_ARCHS:-90}" -DPKG_CONFIG_EXECUTABLE="$pc" \
    -DCMAKE_PREFIX_PATH="$prefix/usr" >build-gpu/configure.log 2>&1 ||
    { tail -30 build-gpu/configure.log; exit 1; }
cmake --build build-gpu -j "$(nproc)" >build-gpu/build.log 2>&1 ||
    { grep -E "error|Error" build-gpu/build.log | head -40; exit 1; }
echo "device-setup: built build-gpu ($(nvcc --version | tail -1))"
