#!/usr/bin/env bash
# Installs the Debian packages halo's build and tests need. Idempotent and quiet; run as root
# (or with sudo available) on Debian 12. Prints nothing when everything is already there.
set -euo pipefail

packages=(build-essential cmake pkg-config libcjson-dev clang python3 nodejs npm)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere (nvm, NodeSource): the commands are what matter.
filtered=()
for p in "${missing[@]}"; do
    case "$p" in
        nodejs) command -v node >/dev/null || filtered+=("$p") ;;
        npm) command -v npm >/dev/null || filtered+=("$p") ;;
        *) filtered+=("$p") ;;
    esac
done
[ ${#filtered[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "deps.sh: installing ${filtered[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${filtered[@]}" >/dev/null
