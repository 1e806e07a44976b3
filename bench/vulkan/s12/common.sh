# Sourced by the session 12 call scripts: timestamps, the NVIDIA Vulkan environment, and halo
# Vulkan built and tested with the 24-layer q2 GGUF written to /dev/shm meanwhile.
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
m=/dev/shm/halo-dsv4-q2-24.gguf
vk_env() {
  export LD_LIBRARY_PATH=/tmp/halo-vk-prefix/usr/lib/x86_64-linux-gnu:/tmp/halo-vk-prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export VK_ICD_FILENAMES=$VK_DRIVER_FILES
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
}
# build_test_write W EXCLUDE: build-vk-dev/, then ctest -R vulkan (minus the regex EXCLUDE, every
# golden sequence) while the GGUF is written; logs in W.
build_test_write() {
  local W=$1 ex=${2:-}
  rm -f /dev/shm/halo-*.gguf*
  CTEST_REGEX=vulkan_hazard HALO_VK_TEST_ALL=0 OUT=$W/b timeout 200 scripts/device-vulkan.sh .carry/vulkan/debs > $W/build.log 2>&1
  echo "build rc=$?"; grep -E "built in|tests passed" $W/build.log; el built
  vk_env
  (timeout 250 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:24 --write-gguf $m.part \
    > $W/write.log 2>&1 && mv $m.part $m; echo "write rc=$?" >> $W/write.log) &
  (cd build-vk-dev && HALO_VK_TEST_ALL=1 timeout -k 5 ${TEST_S:-400} ctest -j 4 --output-on-failure \
    -R vulkan ${ex:+-E "$ex"}) > $W/vk-tests.log 2>&1
  echo "tests rc=$?"; grep -E "tests passed|\(Failed\)|Passed +[0-9.]+ sec|Timeout|Not Run|FAIL" $W/vk-tests.log | tail -16
  el "vulkan tests"
}
# build_write W: build-vk-dev/ (only the hazard test run) and the 24-layer q2 GGUF written to
# /dev/shm, one after the other (for calls that only benchmark); logs in W; the GPU env set after.
build_write() {
  local W=$1
  rm -f /dev/shm/halo-*.gguf*
  CTEST_REGEX=vulkan_hazard HALO_VK_TEST_ALL=0 OUT=$W/b timeout 200 scripts/device-vulkan.sh .carry/vulkan/debs > $W/build.log 2>&1
  echo "build rc=$?"; grep -E "built in|tests passed" $W/build.log; el built
  vk_env
  timeout 250 build-vk-dev/src/cli/halo bench --synthetic dsv4-flash-q2:24 --write-gguf $m > $W/write.log 2>&1
  echo "write rc=$?"; el written
}
