# budget_s: 130
# cuda-moe-1 (session 8): the one-token experts' kernels built for their shape (moe_dec.cuh,
# HALO_CUDA_MDQ). Build with the kernel trace compiled in (-DHALO_CUDA_TRACE_KERNELS=ON; only
# the CLI and test_backend_cuda_intdot), 4-layer in-graph traces of the generic streams and the
# new kernels (IQ2_XXS sign masks from the table, and computed), the new test case (bitwise against HALO_CUDA_MDQ=0, and against the CPU), then
# traces with two other shares of blocks for the shared expert in the time left.
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
timeout 80 cmake --build build-gpu -j "$(nproc)" --target halo test_backend_cuda_intdot \
  > $out/build.log 2>&1 || { grep -E "error|Error" $out/build.log | head -30; exit 1; }
el built
H=build-gpu/src/cli/halo
B4="--synthetic dsv4-flash-q2:4 --backend cuda --weights device -p 0 -n 32 -r 1 -o md"
K="mdq_gu_kernel|mdq_dn_kernel|moeq_up_stream|moeq_swiglu|gate_up_fast|down_fast|route1"
trace() { # one 4-layer traced tg32 with the env assignment $1
  [ $(left) -gt 14 ] || { echo "skipped $1"; return; }
  local f=$out/trace4-$(echo ${1#*=} | tr -c 'a-z0-9\n' _).txt
  env $1 HALO_CUDA_TRACE=1 timeout 12 $H bench $B4 > $f 2>&1
  echo "== $1: $(grep -E '^\| deep' $f | awk -F'|' '{print $(NF-3)}') t/s; $(grep -o 'a paired step [0-9.]* us' $f)"
  grep -E "^  ($K) " $f | awk '{printf "   %-16s %6s us/launch\n", $1, $4}'
}
trace HALO_CUDA_MDQ=0; trace X=1; trace HALO_CUDA_MDQSIGN=0; el traces
l=$(( $(left) - 14 )); [ $l -gt 45 ] && l=45
HALO_TEST_ONLY=experts_kernels timeout $l build-gpu/tests/backend/test_backend_cuda_intdot \
  > $out/test-mdq.log 2>&1; echo "test rc=$? (timeout $l s)"
grep -E "differ|vs non-precise|FAIL|ok  |CHECK|failed|sync:" $out/test-mdq.log | cut -c1-110 | tail -14; el test
trace HALO_CUDA_MDQSPLIT=20,20; trace HALO_CUDA_MDQSPLIT=40,40; el done
