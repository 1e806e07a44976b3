#!/usr/bin/env bash
# Precision of the fast modes against the CPU's precise logits, on the full-width synthetic
# model of test_model_gpu_full_width (4 layers at the real shapes, vocabulary 8192) and its
# 600-token prompt (the same LCG): `halo logits` four times (CPU precise = the reference, CPU
# fast = activations quantized to Q8 for integer dots as ggml's CPU backend, CUDA precise, CUDA
# fast = tensor-core prefill with f16 activations: HALO_CUDA_MMA=1), then per mode the largest
# max|Δ| / range of the reference row over the positions, and the top-1 flips (near-tie: the
# reference's top-2 margin within 2 max|Δ| of that row), as the test counts them.
#   bench/cuda/precision.sh HALO_BINARY OUTDIR
set -euo pipefail
halo=$1 out=$2
mkdir -p "$out"
model=${MODEL:-synthetic:dsv4-flash-q2:4/v8192} n=${N:-600}
python3 - "$out/tokens.i32" "$n" <<'PY'
import struct, sys
seed, toks = 12345, []
n = int(sys.argv[2])
for i in range(n):
    seed = (seed * 1664525 + 1013904223) & 0xffffffff
    toks.append((seed >> 8) % 8192)
open(sys.argv[1], "wb").write(struct.pack("<%di" % n, *toks))
PY
run() { # name backend [precise]
    local name=$1 be=$2
    shift 2
    timeout 100 "$halo" logits -m "$model" --tokens "$out/tokens.i32" --out "$out/$name.f32" \
        --backend "$be" "$@" >"$out/$name.log" 2>&1 || { echo "$name failed"; tail -3 "$out/$name.log"; }
}
run cpu_precise cpu --precise
run cpu_fast cpu
HALO_CUDA_MMA=0 run cuda_precise cuda
HALO_CUDA_MMA=1 run cuda_fast cuda
python3 - "$out" <<'PY'
import array, sys, os, operator
d, V = sys.argv[1], 8192
def load(n):
    a = array.array("f"); a.frombytes(open(os.path.join(d, n + ".f32"), "rb").read()); return a
ref = load("cpu_precise"); T = len(ref) // V
for name in ("cpu_fast", "cuda_precise", "cuda_fast"):
    if not os.path.exists(os.path.join(d, name + ".f32")): print(name, "missing"); continue
    got = load(name); worst, at, flips, bad = 0.0, -1, 0, 0
    for t in range(T):
        r, g = ref[t*V:(t+1)*V], got[t*V:(t+1)*V]
        md = max(map(abs, map(operator.sub, r, g))); hi = max(r); rng = hi - min(r)
        rel = md / rng if rng > 0 else 0
        if rel > worst: worst, at = rel, t
        br = r.index(hi); bg = g.index(max(g))
        if br != bg:
            flips += 1
            second = max(x for i, x in enumerate(r) if i != br)
            if hi - second > 2 * md: bad += 1
    print("%-13s vs cpu_precise: max rel %.2e (position %d), top-1 differs at %d of %d positions (%d not near-ties)" % (name, worst, at, flips, T, bad))
PY
