#!/usr/bin/env bash
# `make demo`: until halo can generate text, show the part that works end to end on a real-size
# model: write DeepSeek V4 Flash's full tensor table (80.76 GiB of tensor data, as ds4's q2 file
# has it) as a sparse GGUF — no weights exist on this machine, so the data is a hole that takes
# no disk — and inspect it with `halo inspect`, which reads the header only.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model="$dir/DeepSeek-V4-Flash-IQ2XXS-w2Q2K.gguf"

"$build/tests/common/write_dsv4_flash" "$model" q2
echo "== wrote $model"
echo "   apparent size $(du -h --apparent-size "$model" | cut -f1), on disk $(du -h "$model" | cut -f1)"
echo "== halo inspect $model"
start=$(date +%s%N)
"$build/src/cli/halo" inspect "$model"
end=$(date +%s%N)
echo "== inspected in $(( (end - start) / 1000000 )) ms"
