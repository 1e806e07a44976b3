#!/usr/bin/env bash
# Installs what halo's build and tests need on Debian 12: the packages below (as root, or with
# sudo) and ggml's prebuilt CPU libraries that the quant tests compare against
# (scripts/fetch-ggml.sh, from the npm registry). Idempotent and quiet: prints nothing when
# everything is already there. `deps.sh fuzz` also installs clang for `make fuzz`; `deps.sh gpu`
# Debian's hipcc (ROCm 5.2) to compile the GPU backend as HIP (-DHALO_HIP=ON; docs/hip.md). The
# CUDA toolkit is not a Debian package recent enough for halo's targets: nvcc comes from NVIDIA's
# installer, in /usr/local/cuda (docs/cuda.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

packages=(build-essential cmake pkg-config libcjson-dev libpcre2-dev libedit-dev python3
          libmicrohttpd-dev liburing-dev libxxhash-dev)
# The Vulkan backend (-DHALO_VULKAN=ON): headers and loader, glslc for the shaders, and Mesa's
# lavapipe (a Vulkan driver on the CPU) that CI runs its Vulkan tests on.
packages+=(libvulkan-dev glslc mesa-vulkan-drivers)
[ "${1:-}" = fuzz ] && packages+=(clang)
[ "${1:-}" = gpu ] && packages+=(hipcc libamdhip64-dev rocm-device-libs)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "deps.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

"$here/fetch-ggml.sh"
"$here/fetch-sdks.sh"
