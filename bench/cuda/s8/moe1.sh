# budget_s: 150
# cuda-moe-1 (session 8): the one-token experts' kernels built for their shape (moe_dec.cuh,
# HALO_CUDA_MDQ). Build with the kernel trace compiled in (-DHALO_CUDA_TRACE_KERNELS=ON; only
# the CLI and test_backend_cuda_intdot), the new test case (bitwise against HALO_CUDA_MDQ=0, and
# against the CPU), then 4-layer in-graph traces: the generic streams, the new kernels with
# three shares of blocks for the shared expert, and one 43-layer tg64 if time is left.
set -u; out=${OUT:-/tmp/halo-out}; mkdir -p $out
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( 146 - ($(date +%s) - t0) )); }
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
timeout 80 cmake --build build-gpu -j "$(nproc)" --target halo test_backend_cuda_intdot \
  > $out/build.log 2>&1 || { grep -E "error|Error" $out/build.log | head -30; exit 1; }
el built
HALO_TEST_ONLY=experts_kernels timeout 50 build-gpu/tests/backend/test_backend_cuda_intdot \
  > $out/test-mdq.log 2>&1; echo "test rc=$?"
grep -E "differ|vs non-precise|FAIL|ok  |CHECK|failed" $out/test-mdq.log | cut -c1-110 | tail -14; el test
H=build-gpu/src/cli/halo
B4="--synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0 -n 32 -r 1 -o md"
K="mdq_gu_kernel|mdq_dn_kernel|moeq_up_stream|moeq_swiglu|gate_up_fast|down_fast|route1"
for v in HALO_CUDA_MDQ=0 X=1 HALO_CUDA_MDQSPLIT=20,20 HALO_CUDA_MDQSPLIT=40,40; do
  f=$out/trace4-${v#*=}.txt
  env $v HALO_CUDA_TRACE=1 timeout 12 $H bench $B4 > $f 2>&1
  echo "== $v: $(grep -E '^\| deep' $f | awk -F'|' '{print $(NF-3)}') t/s; $(grep -o 'a paired step [0-9.]* us' $f)"
  grep -E "^  ($K) " $f | awk '{printf "   %-16s %6s us/launch\n", $1, $4}'
done; el traces
l=$(left); if [ $l -gt 40 ]; then
  timeout $l $H bench --synthetic dsv4-flash-q2:43 --backend cuda --weights device -p 0 -n 64 -r 1 \
    -o md > $out/b43.md 2>&1
  echo "43L default (trace build, HALO_CUDA_TRACE unset): $(grep -E '^\| deep' $out/b43.md | awk -F'|' '{print $(NF-3)}') t/s"
else echo "no time for the 43-layer run ($l s left)"; fi; el done
