# budget_s: 130
# cuda-dense-2 (session 8), on main with cuda-moe merged. Build with the kernel trace compiled in
# (-DHALO_CUDA_TRACE_KERNELS=ON; the CLI and three tests). Tests of what cd-1 did not run (hcpost2
# with the ffn norm inside, HALO_CUDA_HCNORM; the half-row projection, MVQSPLIT) against the CPU
# and their switches, with the forward and graph-replay tests, while the 43-layer model is made.
# Then 43-layer traced tg32 with HALO_CUDA_GRAPH_STATS=1 (per-kernel times and the host's times of
# a graph step: does the host bound decode now?), the same with HALO_CUDA_GRAPH_FIRST=2, and in the
# time left 4-layer traces: all five new paths off, PDLFIRST=1 (kernels trigger the next launch
# before their wait), the defaults.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 126 - ($(date +%s) - t0) )); }
ls .carry/cuda/debs/*.deb >/dev/null 2>&1 || { mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs; }
# scripts/device-setup.sh's steps, with the trace compiled in and four targets built
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
timeout 75 cmake --build build-gpu -j "$(nproc)" --target halo test_backend_cuda_ops \
  test_model_forward_gpu test_backend_cuda_graphs > $out/build.log 2>&1 ||
  { grep -E "error|Error" $out/build.log | head -30; exit 1; }
el built
T=build-gpu/tests
H=build-gpu/src/cli/halo
K="hcpost2_kernel|hcpost1_kernel|hc2_kernel|rms_norm4_kernel|norm_rope2_kernel|norm_rope_kernel|rope_copy_kernel|copy_batch_kernel|rope_kernel|mvq_dense_kernel|multi_kernel|score_nj_kernel|attention_decode_kernel|mdq_gu_kernel|mdq_dn_kernel|route1_kernel"
trace() { # one traced tg32 ($1: layers, $2: env assignments, $3: seconds it needs, $4: timeout)
  [ $(left) -gt $3 ] || { echo "skipped $1L $2"; return; }
  local f=$out/trace$1-$(echo "$2" | tr -c 'A-Za-z0-9\n' _ | cut -c1-60).txt
  env $2 HALO_CUDA_TRACE=1 HALO_CUDA_GRAPH_STATS=1 timeout $4 $H bench \
    --synthetic dsv4-flash-q2:$1 --backend cuda --weights device -p 0 -n 32 -r 1 -o md > $f 2>&1
  echo "== $1L $2: $(grep -E '^\| deep' $f | awk -F'|' '{print $(NF-3)}') t/s; $(grep -o 'a paired step [0-9.]* us' $f)"
  grep -E "^  ($K) " $f | awk '{printf "   %-24s %5s/step %7s us/launch %6s lead\n", $1, $2, $4, $5}'
  grep -E "host us a graph step|launches per graph" $f | sed -E 's/halo cuda graphs: //' | cut -c1-330
}
# The tests (~15 s) run while the first 43-layer model is made (~20 s, before any timed step).
(HALO_TEST_ONLY=hcpost2_same,hc_then_norm,hc_norm_close,mvq_ring,mvq_half timeout 30 \
  $T/backend/test_backend_cuda_ops > $out/test-ops.log 2>&1; echo "ops rc=$?" >> $out/test-ops.log) &
# ctest in a process group of its own, killed whole at 30 s (its kill alone leaves the tests)
(cd build-gpu && exec setsid ctest -j 2 -R "test_model_forward_gpu|test_backend_cuda_graphs$" \
  > $out/test-fwd.log 2>&1) &
tp=$!
(exec setsid bash -c "sleep 30; kill -TERM -- -$tp; sleep 2; kill -KILL -- -$tp") >/dev/null 2>&1 &
wp=$!
trace 43 X=1 30 40
wait $tp; echo "fwd rc=$?" >> $out/test-fwd.log; kill -- -$wp 2>/dev/null
wait
grep -E "rc=|^FAIL|^ok  |outputs differ|failed" $out/test-ops.log | cut -c1-170
grep -E "rc=|Test +#|tests passed|differ" $out/test-fwd.log | cut -c1-170 | tail -6
el "tests, 43L"
trace 43 HALO_CUDA_GRAPH_FIRST=2 30 35
el "43L first"
OFF="HALO_CUDA_HCPOST2=0 HALO_CUDA_HCNORM=0 HALO_CUDA_NRPAIR=0 HALO_CUDA_ROPECOPY=0 HALO_CUDA_MVQSPLIT=0"
trace 4 "$OFF" 9 9
trace 4 HALO_CUDA_PDLFIRST=1 9 9
trace 4 X=1 9 9
el done
