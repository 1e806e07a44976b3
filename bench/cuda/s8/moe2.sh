# budget_s: 130
# cuda-moe-2 (session 8): moe_dec.cuh after cuda-moe-1 (tables one row a thread, routed rows
# prefetched into L2, down's routed blocks starting before their wait, x's pieces loaded at
# once, shared share 20 %). Trace build (-DHALO_CUDA_TRACE_KERNELS=ON; the CLI and two tests
# only), the new test case on 16 experts (bitwise against HALO_CUDA_MDQ=0 and the other
# switches, and against the CPU), test_backend_cuda_graphs (graph replay bitwise eager, with a
# real-shape q2 model in fast mode: the new kernels in graphs), 4-layer in-graph traces of the
# switches, then one 43-layer tg64 with the defaults if time is left.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 126 - ($(date +%s) - t0) )); }
ls .carry/cuda/debs/*.deb >/dev/null 2>&1 || { mkdir -p .carry/cuda && rm -rf .carry/cuda/debs && cp -a .carry/vulkan/debs/prefix .carry/cuda/debs; }
# scripts/device-setup.sh's steps, with the trace compiled in and only two targets built
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
timeout 80 cmake --build build-gpu -j "$(nproc)" --target halo test_backend_cuda_intdot test_backend_cuda_graphs \
  > $out/build.log 2>&1 || { grep -E "error|Error" $out/build.log | head -30; exit 1; }
el built
HALO_TEST_ONLY=experts_kernels timeout 30 build-gpu/tests/backend/test_backend_cuda_intdot \
  > $out/test-mdq.log 2>&1; echo "test rc=$?"
grep -E "differ|vs non-precise|FAIL|ok  |CHECK|failed|sync:" $out/test-mdq.log | cut -c1-110 | tail -16; el test
timeout 35 build-gpu/tests/backend/test_backend_cuda_graphs > $out/test-graphs.log 2>&1
echo "graphs test rc=$?"; grep -E "differ|FAIL|ok  |CHECK|failed" $out/test-graphs.log | cut -c1-110 | tail -8
el graphs
H=build-gpu/src/cli/halo
B4="--synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0 -n 32 -r 1 -o md"
K="mdq_gu_kernel|mdq_dn_kernel|moeq_up_stream|moeq_swiglu_kernel|down_fast|route1_kernel"
trace() { # one 4-layer traced tg32 with the env assignment $1
  [ $(left) -gt 46 ] || { echo "skipped $1"; return; }
  local f=$out/trace4-$(echo $1 | tr -c 'A-Za-z0-9\n' _).txt
  env $1 HALO_CUDA_TRACE=1 timeout 12 $H bench $B4 > $f 2>&1
  echo "== $1: $(grep -E '^\| deep' $f | awk -F'|' '{print $(NF-3)}') t/s; $(grep -o 'a paired step [0-9.]* us' $f)"
  grep -E "^  ($K) " $f | awk '{printf "   %-20s %6s us/launch %6s lead\n", $1, $4, $5}'
}
for v in HALO_CUDA_MDQ=0 X=1 HALO_CUDA_MDQPF=2 HALO_CUDA_MDQPF=1 HALO_CUDA_MDQSPLIT=15,20 \
         HALO_CUDA_MDQSPLIT=25,25; do trace $v; done; el traces
l=$(left); if [ $l -gt 40 ]; then
  HALO_CUDA_GRAPH_STATS=1 timeout $l $H bench --synthetic dsv4-flash-q2:43 --backend cuda \
    --weights device -p 0 -n 64 -r 1 -o md > $out/b43.md 2>&1
  echo "43L tg64 defaults (trace build, HALO_CUDA_TRACE unset): $(grep -E '^\| deep' $out/b43.md | awk -F'|' '{print $(NF-3)}') t/s"
  grep -E "graphs|reads device" $out/b43.md | cut -c1-150 | head -3
else echo "no time for the 43-layer run ($l s left)"; fi; el done
