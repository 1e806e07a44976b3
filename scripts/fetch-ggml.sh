#!/usr/bin/env bash
# Installs ggml's prebuilt CPU libraries (llama.cpp v0.5.0, from the npm package
# @node-llama-cpp/linux-x64@3.22.1: libggml-base.so and libggml-cpu-<variant>.so) into
# third_party/node-llama-cpp-linux-x64/. The quant tests dlopen them to compare halo with ggml
# bit for bit, and bench/quant measures against ggml's CPU kernels. Idempotent and quiet: prints
# nothing when the package is already there. Needs npm (scripts/deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

pkg="@node-llama-cpp/linux-x64"
version="3.22.1"
dest="third_party/node-llama-cpp-linux-x64"

if [ -f "$dest/bins/linux-x64/libggml-base.so" ] &&
    grep -q "\"version\": *\"$version\"" "$dest/package.json" 2>/dev/null; then
    exit 0
fi

command -v npm >/dev/null || { echo "fetch-ggml.sh: npm not found (run scripts/deps.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null 2>"$tmp/npm.log") || {
    cat "$tmp/npm.log" >&2
    echo "fetch-ggml.sh: npm pack $pkg@$version failed" >&2
    exit 1
}
mkdir -p "$tmp/x"
tar -xzf "$tmp"/*.tgz -C "$tmp/x"
[ -f "$tmp/x/package/bins/linux-x64/libggml-base.so" ] || {
    echo "fetch-ggml.sh: $pkg@$version has no bins/linux-x64/libggml-base.so" >&2
    exit 1
}
mkdir -p third_party
rm -rf "$dest"
mv "$tmp/x/package" "$dest"
