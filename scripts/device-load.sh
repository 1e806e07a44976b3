#!/usr/bin/env bash
# On the GPU machine, after scripts/device-test.sh (or device-setup.sh) built build-gpu/: loads a
# real-shaped synthetic DeepSeek V4 Flash GGUF from disk onto the GPU and measures what
# docs/cuda.md promises of the loader: load time, the file's pages left in the page cache
# (mincore), /proc/meminfo's Cached delta and the peak RSS, with weights in device memory (read
# straight from the file) and in GPU-visible host memory (the pinned arena); `dd iflag=direct`
# on the same file is the disk's own speed, for scale.
#   scripts/device-load.sh [LAYERS] [DIR]    default 2 layers (5.6 GB), DIR /var/tmp/halo-load
set -uo pipefail
cd "$(dirname "$0")/.."
layers=${1:-2}
dir=${2:-/var/tmp/halo-load}
mkdir -p "$dir"
source build-gpu/env.sh
df -hT "$dir" | tail -1
model=$dir/dsv4-flash-q2-$layers.gguf
build-gpu/src/cli/halo bench --synthetic "dsv4-flash-q2:$layers" --write-gguf "$model" \
    -t "$(nproc)" 2>"$dir/write.log" || { tail -3 "$dir/write.log"; exit 1; }
ls -l "$model"
sync
echo "dd iflag=direct (the disk, for scale):"
dd if="$model" of=/dev/null bs=64M iflag=direct 2>&1 | tail -1
for w in device host; do
    HALO_LOAD_WEIGHTS=$w HALO_LOAD_MODEL=$model build-gpu/tests/model/test_model_gpu_load
done
rm -f "$model"
