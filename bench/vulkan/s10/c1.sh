#!/bin/bash
# Session 10 call 1: (a) llama.cpp v0.5.0 Vulkan llama-bench built in the background
# (build_llama_vk.sh), brought back xz-compressed; (b) halo Vulkan built; (c) an ablation of the
# 8-layer decode step: tg64 with HALO_VK_SKIP dropping one family of dispatches at a time (wrong
# results, timing only), so each family's cost inside the pipelined step, barriers included, is
# what the step loses with it. Carry .carry/vulkan, .carry/llsrc (slim.sh bench).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out; W=/tmp/c1; mkdir -p $W
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
(bash bench/vulkan/s10/build_llama_vk.sh > $W/llama-build.txt 2>&1) &
lb=$!
CTEST_REGEX=vulkan_hazard OUT=$W timeout 100 scripts/device-vulkan.sh .carry/vulkan/debs > $W/halo-build.txt 2>&1
echo "halo build+hazard rc=$?"; grep -E "built in|tests passed|failed" $W/halo-build.txt | head; el built
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
h=build-vk-dev/src/cli/halo
tg() { # NAME SKIP
  local t=$(date +%s)
  timeout 40 env HALO_VK_PROFILE=2 HALO_VK_SKIP="$2" $h bench --synthetic dsv4-flash-q2:8 --backend vulkan \
    --weights device -p 0 -n 64 -r 3 > $W/tg-$1.md 2> $W/tg-$1.err
  local rc=$? v=$(grep -E "\| +tg64 " $W/tg-$1.md | awk -F'|' '{print $(NF-3)}')
  echo "$1 skip='$2' rc=$rc tg64 $v ($(( $(date +%s) - t )) s) $(grep -o 'GPU busy.*' $W/tg-$1.err | tail -1 | cut -c1-60)" | tee -a $out/ablation.txt
}
tg base ""
tg no_hc "hc_pre/,hc_post/"
tg no_moe_routed "moe/matvec_moe"
tg no_moe_shared "moe/matvec_q8,moe/matvec_q8s"
tg no_moe_router "moe/moe_route,moe/matvec_wide"
tg no_attn_q8 "matmul/matvec_q8,matmul_multi/matvec_q8"
tg no_attn_f16 "matmul_multi/matvec_wide"
tg no_attention "attention/,pool/,topk/"
tg no_copy "copy"
tg no_small "rope/,rms_norm/,embed/"
tg base2 ""
el "ablation done"
wait $lb; tail -3 $W/llama-build.txt; el "llama build done"
b=/tmp/llama-vk/build/bin/llama-bench
if [ -x $b ]; then xz -T8 -c $b > $out/llama-bench.xz; ls -la $out/llama-bench.xz; $b --help 2>&1 | head -2; fi
cp $W/llama-build.txt $out/; tail -30 /tmp/llama-vk.log > $out/llama-vk-log-tail.txt
tar czf $out/c1.tgz -C $W . 2>/dev/null
el done
