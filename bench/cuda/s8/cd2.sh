# budget_s: 130
# cuda-dense-2 (session 8): the in-graph kernel trace (-DHALO_CUDA_TRACE_KERNELS=ON; only the CLI
# and test_backend_cuda_ops built) decides the defaults: 4-layer traced tg32 with this branch's
# defaults (hcpost2 with the ffn norm, the norm-rope pair, the rope with the queued copies), with
# all four off (session 7's launches), and the measuring switches HALO_CUDA_MVQRING=7,
# HALO_CUDA_EARLY=16384 and HALO_CUDA_GRAPH_FIRST=2; then one 43-layer traced tg32 with
# HALO_CUDA_GRAPH_STATS=1 (per-kernel times and the host's times of a step at full depth).
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 126 - ($(date +%s) - t0) )); }
ls .carry/cuda/debs/*.deb >/dev/null 2>&1 || { mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs; }
# scripts/device-setup.sh's steps, with the trace compiled in and two targets built
prefix=/tmp/halo-prefix; mkdir -p $prefix
for f in .carry/cuda/debs/*.deb; do dpkg -x "$f" $prefix; done
lib=$prefix/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$prefix
PKG_CONFIG_PATH= pkg-config --exists gnutls 2>/dev/null || [ -f $lib/pkgconfig/gnutls.pc ] ||
  printf 'Name: gnutls\nDescription: stand-in\nVersion: 3.7.9\nLibs:\nCflags:\n' > $lib/pkgconfig/gnutls.pc
pc=$(command -v pkg-config || true); [ -n "$pc" ] || pc=$prefix/usr/bin/pkgconf
export LD_LIBRARY_PATH=$lib:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout 30 cmake -S . -B build-gpu -DHALO_CUDA=ON -DHALO_WERROR=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DHALO_CUDA_TRACE_KERNELS=ON -DPKG_CONFIG_EXECUTABLE="$pc" -DCMAKE_PREFIX_PATH="$prefix/usr" \
  > $out/configure.log 2>&1 || { tail -20 $out/configure.log; exit 1; }
timeout 80 cmake --build build-gpu -j "$(nproc)" --target halo test_backend_cuda_ops \
  > $out/build.log 2>&1 || { grep -E "error|Error" $out/build.log | head -30; exit 1; }
el built
H=build-gpu/src/cli/halo
K="hcpost2_kernel|hcpost1_kernel|hc2_kernel|rms_norm4_kernel|norm_rope2_kernel|norm_rope_kernel|rope_copy_kernel|copy_batch_kernel|rope_kernel|mvq_dense_kernel|multi_kernel|score_nj_kernel|attention_decode_kernel"
trace() { # one traced tg32 ($1: layers, $2: env assignments)
  [ $(left) -gt $3 ] || { echo "skipped $1L $2"; return; }
  local f=$out/trace$1-$(echo "$2" | tr -c 'A-Za-z0-9\n' _ | cut -c1-60).txt
  env $2 HALO_CUDA_TRACE=1 HALO_CUDA_GRAPH_STATS=1 timeout $4 $H bench \
    --synthetic dsv4-flash-q2:$1 --backend cuda --weights device -p 0 -n 32 -r 1 -o md > $f 2>&1
  echo "== $1L $2: $(grep -E '^\| deep' $f | awk -F'|' '{print $(NF-3)}') t/s; $(grep -o 'a paired step [0-9.]* us' $f)"
  grep -E "^  ($K) " $f | awk '{printf "   %-24s %5s/step %7s us/launch\n", $1, $2, $4}'
  grep -E "host us a graph step" $f | sed -E 's/halo cuda graphs: host us a graph step: //' | cut -c1-300
}
trace 4 X=1 12 11
trace 4 "HALO_CUDA_HCPOST2=0 HALO_CUDA_NRPAIR=0 HALO_CUDA_ROPECOPY=0 HALO_CUDA_HCNORM=0" 12 11
trace 4 HALO_CUDA_MVQRING=7 12 11
trace 4 HALO_CUDA_EARLY=16384 12 11
trace 4 HALO_CUDA_GRAPH_FIRST=2 12 11
el traces4
l=$(( $(left) - 2 )); trace 43 X=1 30 $l
el done
