#!/bin/bash
# Session 9 call 1: issue 12's table in one call. halo CUDA and llama.cpp v0.5.0 CUDA on the same
# 43-layer q2 GGUF (bench/cuda/peer.sh writes it to /dev/shm, runs both engines at depth 0 and
# 24,576, then the copy bandwidth and decode's fraction of the roofline).
# Carry: .carry/llcuda (the static llama-bench built by bench/cuda/build_llama_cuda.sh),
# .carry/vulkan (the debs device-setup.sh needs), with bench/cuda/s7/slim.sh bench.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs
timeout 110 scripts/device-setup.sh .carry/cuda/debs > $out/setup.log 2>&1 || tail $out/setup.log
el "cuda built"
xz -dc .carry/llcuda/llama-bench-cuda.xz > /tmp/llama-bench-cuda && chmod +x /tmp/llama-bench-cuda
nccl=$(find / -name "libnccl.so.2*" -not -path "/proc/*" 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/usr/local/cuda/lib:/usr/local/cuda/lib64${nccl:+:$(dirname $nccl)}:${LD_LIBRARY_PATH:-}
ldd /tmp/llama-bench-cuda | grep "not found"
LLAMA_BENCH=/tmp/llama-bench-cuda LAYERS=43 REPS=2 OUT=$out timeout -k 5 ${PEER_S:-470} \
  bash bench/cuda/peer.sh > $out/peer.log 2>&1
echo "peer rc=$?"; tail -16 $out/peer.log; el "peer done"
