# vulkan helper's FINAL-AB run 1 (everything session 6 added off) on the 24-layer file; the defaults are the comparison's rows
prefix=/tmp/halo-vk-prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
h=build-vk-dev/src/cli/halo m=/dev/shm/halo-dsv4-q2-24.gguf
echo "== s6 off"; timeout 55 env HALO_VK_PROFILE=2 HALO_VK_FUSE_MOE=0 HALO_VK_DEFER_NORM=0 HALO_VK_DEFER_POST=0 \
    HALO_VK_DEFER_ROPE=0 HALO_VK_COPY_FWD=0 HALO_VK_HC_SLICES=1 \
    $h bench -m $m --backend vulkan -p 0 -n 64 -r 2 2>&1 | grep -E "tg64|vulkan stats"
