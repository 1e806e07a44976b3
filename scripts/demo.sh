#!/usr/bin/env bash
# `make demo`: halo end to end on a fresh machine, no downloads.
#  1. Text generation with the embedded model (models/, a tiny DeepSeek V4 trained on the King
#     James Bible): `halo run` streams the text, then prints its speed line.
#  2. The real thing's shape: DeepSeek V4 Flash's full tensor table (80.76 GiB of tensor data,
#     as ds4's q2 file has it) written as a sparse GGUF — the weights are holes that take no
#     disk — and opened by `halo inspect`, which reads the header only.
set -euo pipefail
build=${1:-build}
halo="$build/src/cli/halo"

echo "== halo run -p \"In the beginning\" --raw -n 80 --temp 0.8 --seed 1   (embedded model)"
"$halo" run -p "In the beginning" --raw -n 80 --temp 0.8 --seed 1
echo

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model="$dir/DeepSeek-V4-Flash-IQ2XXS-w2Q2K.gguf"
"$build/tests/common/write_dsv4_flash" "$model" q2
echo "== halo inspect on DeepSeek V4 Flash's real tensor table (sparse file: apparent size" \
     "$(du -h --apparent-size "$model" | cut -f1), on disk $(du -h "$model" | cut -f1))"
start=$(date +%s%N)
"$halo" inspect "$model" | sed -n '1,/^bytes by type/p;/^bytes by type/,/^$/p' | uniq
end=$(date +%s%N)
echo "== inspected in $(( (end - start) / 1000000 )) ms; \`halo inspect FILE\` shows the rest"
