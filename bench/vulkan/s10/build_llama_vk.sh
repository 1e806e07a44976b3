#!/bin/bash
# Builds llama.cpp v0.5.0's llama-bench with GGML_VULKAN, statically linked against ggml, on the
# H200 machine (16 cores: ~5 min, against ~40 on the 2-core dev VM), from a source tarball
# carried as .carry/llsrc/llama-src.tar.xz (the node-llama-cpp 3.22.1 bundle's tree without
# models/docs/tests) with Debian 12's glslc and Vulkan headers from .carry/vulkan/debs/prefix,
# as shared/peers/llamacpp_h200.sh does (its two build fixes for Debian 12's headers and glslc
# applied the same way). Writes /tmp/llama-vk/build/bin/llama-bench; log /tmp/llama-vk.log.
set -u
R=$(pwd); src=/tmp/llama-vk; pfx=/tmp/llvk-prefix
rm -rf $src $pfx; mkdir -p $src $pfx
xz -dc $R/.carry/llsrc/llama-src.tar.xz | tar xf - -C $src
for f in $R/.carry/vulkan/debs/prefix/*.deb; do dpkg -x $f $pfx; done
for f in $R/.carry/vulkan/debs/root/*.deb; do dpkg -x $f /; done; ldconfig
# the prefix's libvulkan.so links to libvulkan.so.1, which the root package holds
dpkg -x $R/.carry/vulkan/debs/root/libvulkan1_*.deb $pfx
lib=$pfx/usr/lib/x86_64-linux-gnu
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$pfx/usr/bin/glslc" > $pfx/glslc; chmod +x $pfx/glslc
vs=$src/ggml/src/ggml-vulkan
sed -i -E 's@^(\s*string_to_spv\("fa_decode_ph[12]".*)$@#if defined(GGML_VULKAN_COOPMAT_GLSLC_SUPPORT) // xe_fa\n\1\n#endif@' $vs/vulkan-shaders/vulkan-shaders-gen.cpp
sed -i -E 's@^(\s*ggml_vk_create_pipeline\(device, pipelines\.(first|second), "xe_fa_decode_ph[12]".*)$@#if defined(GGML_VULKAN_COOPMAT_GLSLC_SUPPORT) // xe_fa\n\1\n#endif@' $vs/ggml-vulkan.cpp
sed -i -E -e 's@^(\s*std::vector<vk::LayerSettingEXT> settings = \{)$@#if defined(VK_EXT_layer_settings) // hdr\n\1@' \
  -e 's@^(\s*vk::InstanceCreateInfo instance_create_info\(.*), &layer_setting_info\);$@&\n#else\n\1);\n#endif@' $vs/ggml-vulkan.cpp
x86="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
cmake -S $src -B $src/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_OPENSSL=OFF -DGGML_VULKAN=ON $x86 -DVulkan_INCLUDE_DIR=$pfx/usr/include \
  -DVulkan_LIBRARY=$lib/libvulkan.so -DVulkan_GLSLC_EXECUTABLE=$pfx/glslc \
  -DCMAKE_PREFIX_PATH=$pfx/usr > /tmp/llama-vk.log 2>&1 || { tail -20 /tmp/llama-vk.log; exit 1; }
grep -iE "glslc|coopmat|integer dot|bfloat" /tmp/llama-vk.log | head -6
cmake --build $src/build -j ${JOBS:-12} --target llama-bench >> /tmp/llama-vk.log 2>&1
echo "llama build rc=$?"
