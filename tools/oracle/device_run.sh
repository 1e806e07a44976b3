#!/usr/bin/env bash
# Runs the transformers reference for every golden model on the GPU machine's CPU (see README).
# Expects gguf-py at $GGUF_PY (default .oracle/gguf-py) and writes into $OUT (default ./out):
#   hfsrc.tgz  the deepseek_v4 model/config sources and conversion_mapping.py actually used
#   ref.tgz    <model>-<variant>.{logits.f32,margins.f32,greedy.f32,json}
#   ref.log    the run's output
# QUANT=1 runs the quantized variants instead (reference.py --quant; ref.tgz holds their files).
set -u
QUANT=${QUANT:-0}
OUT=${OUT:-$PWD/out}
GGUF_PY=${GGUF_PY:-$PWD/.oracle/gguf-py}
export PYTHONPATH=$GGUF_PY PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
mkdir -p "$OUT" /tmp/hfsrc /tmp/ref
python3 - <<'PY' 2>&1 | tee "$OUT/ref.log"
import os, shutil, transformers, torch, numpy
import transformers.models.deepseek_v4.modeling_deepseek_v4 as m
d = os.path.dirname(m.__file__)
for f in os.listdir(d):
    if f.endswith(".py"):
        shutil.copy(os.path.join(d, f), "/tmp/hfsrc/" + f)
cm = os.path.join(os.path.dirname(transformers.__file__), "conversion_mapping.py")
if os.path.exists(cm):
    shutil.copy(cm, "/tmp/hfsrc/conversion_mapping.py")
print("torch", torch.__version__, "transformers", transformers.__version__, "numpy", numpy.__version__)
PY
tar czf "$OUT/hfsrc.tgz" -C /tmp/hfsrc .
pids=()
variants="tiny-a-f32 tiny-a-f16 tiny-yarn-f32 tiny-yarn-f16"
flags=""
if [ "$QUANT" = 1 ]; then
  variants="tiny-q-ds4 tiny-q-q4km tiny-m-mxfp4"
  flags="--quant"
fi
for mv in $variants; do
  python3 tools/oracle/reference.py --models tests/golden/models --tokens tests/golden/tokens.i32 \
    --out /tmp/ref --only "$mv" $flags > "/tmp/ref/$mv.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat /tmp/ref/*.log >> "$OUT/ref.log"
tar czf "$OUT/ref.tgz" -C /tmp/ref .
echo "reference rc=$rc" | tee -a "$OUT/ref.log"
exit $rc
