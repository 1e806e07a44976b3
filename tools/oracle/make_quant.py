#!/usr/bin/env python3
"""Writes the quantized golden models (configs.QUANT_MODELS) in the mixes users download
(configs.QUANT_VARIANTS), as tests/golden/models/<model>-<mix>.gguf.

  ds4    types per tensor class as in ds4's q2 file (tests/common/dsv4_flash.c has the real
         model's table); the routed experts' IQ2_XXS / Q2_K blocks come from llama-quantize run
         with an importance matrix that llama-imatrix computed on this model, everything else
         from gguf-py's quantizers (F16, Q8_0) or stored F32.
  mxfp4  llama.cpp's converter mix (conversion/deepseek.py tensor_force_quant): MXFP4 experts,
         Q8_0 / BF16 / F32 by the checkpoint's dtype of each tensor; all from gguf-py.
  q4km   `llama-quantize <f32> <out> Q4_K_M`, taken as it comes out (llama.cpp's own mix).

The F32 model they all start from is written to --work only (it is not a fixture). The
importance matrix comes from llama-imatrix run on a copy of that F32 model with a byte-level
SentencePiece vocabulary added (the fixtures themselves have tokenizer.ggml.model = no_vocab,
which llama-imatrix cannot tokenize text with), over a seeded pseudo-text (see calib_text).

Usage: make_quant.py --llama /tmp/llama.cpp/build/bin --golden tests/golden --work /tmp/q
Needs numpy and gguf-py (PYTHONPATH); llama-quantize and llama-imatrix built from v0.5.0.
Deterministic: llama-quantize and llama-imatrix run with fixed thread counts.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

import gguf
from gguf.quants import quantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402
import make_models  # noqa: E402

QT = gguf.GGMLQuantizationType


def tensor_class(name):
    """The tensor classes of tests/common/dsv4_flash.c (whose types depend on the mix)."""
    if name == "token_embd.weight":
        return "embd"
    if name == "output.weight":
        return "output"
    if name.endswith("ffn_gate_tid2eid.weight"):
        return "hash"
    if name.endswith("_fn.weight"):
        return "hc_fn"
    if name.endswith("compressor_ape.weight"):
        return "comp_ape"
    if name.endswith(("compressor_kv.weight", "compressor_gate.weight")):
        return "comp_proj"
    if name.endswith("indexer.attn_q_b.weight"):
        return "idx_q_b"
    if name.endswith("indexer.proj.weight"):
        return "idx_proj"
    if name.endswith(("ffn_gate_exps.weight", "ffn_up_exps.weight")):
        return "exp_gate_up"
    if name.endswith("ffn_down_exps.weight"):
        return "exp_down"
    if "shexp" in name:
        return "shexp"
    if name.endswith("ffn_gate_inp.weight"):
        return "router"
    if name.split(".", 2)[-1] in ("attn_q_a.weight", "attn_q_b.weight", "attn_kv.weight",
                                  "attn_output_a.weight", "attn_output_b.weight"):
        return "attn_proj"
    return "vec"


# Per class; 1-D tensors are always F32 and hash tables I32 (as in both real files).
MIXES = {
    "ds4": dict(embd=QT.F16, output=QT.Q8_0, hc_fn=QT.F16, attn_proj=QT.Q8_0, shexp=QT.Q8_0,
                router=QT.F16, comp_proj=QT.F16, comp_ape=QT.F16, idx_q_b=QT.F16,
                idx_proj=QT.F16, exp_gate_up=QT.IQ2_XXS, exp_down=QT.Q2_K),
    "mxfp4": dict(embd=QT.BF16, output=QT.BF16, hc_fn=QT.F32, attn_proj=QT.Q8_0, shexp=QT.Q8_0,
                  router=QT.BF16, comp_proj=QT.BF16, comp_ape=QT.F32, idx_q_b=QT.Q8_0,
                  idx_proj=QT.BF16, exp_gate_up=QT.MXFP4, exp_down=QT.MXFP4),
}
FILE_TYPE = {"ds4": gguf.LlamaFileType.MOSTLY_IQ2_XXS, "mxfp4": gguf.LlamaFileType.MOSTLY_MXFP4_MOE}
# gguf-py quantizes these; the rest come from llama-quantize
GGUF_PY_TYPES = {QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.MXFP4}


def calib_text(n_bytes=48 * 1024, seed=4004):
    """Seeded ASCII pseudo-text: words of 1-9 lowercase letters, spaces, some punctuation and
    newlines. Its bytes become tokens 0x0a..0x7a of the byte vocabulary below; what matters for
    an importance matrix of random weights is only that activations are typical ones."""
    rng = np.random.default_rng(seed)
    out, n = [], 0
    while n < n_bytes:
        w = "".join(chr(97 + int(c)) for c in rng.integers(0, 26, size=int(rng.integers(1, 10))))
        p = rng.random()
        w += ". " if p < 0.08 else ("\n" if p < 0.1 else " ")
        out.append(w)
        n += len(w)
    return "".join(out)


def byte_vocab(w):
    """A SentencePiece vocabulary of the 256 byte tokens <0x00>..<0xFF> (type BYTE): llama.cpp
    tokenizes any text through byte fallback, token id = byte value."""
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<0x{b:02X}>" for b in range(256)])
    w.add_token_scores([0.0] * 256)
    w.add_token_types([gguf.TokenType.BYTE] * 256)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)


def run(cmd, log):
    with open(log, "w") as f:
        subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT)


def read_raw(path):
    """{name: (uint8 bytes array, type)} of a GGUF's tensors."""
    r = gguf.GGUFReader(path)
    return {t.name: (np.array(t.data), t.tensor_type) for t in r.tensors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama", required=True, help="llama.cpp build/bin (llama-quantize, llama-imatrix)")
    ap.add_argument("--golden", default="tests/golden")
    ap.add_argument("--work", required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(os.path.join(args.golden, "models"), exist_ok=True)
    W = args.work
    for name, m in configs.QUANT_MODELS.items():
        cfg = m["config"]
        tensors = make_models.make_weights(cfg, m["seed"])
        f32 = os.path.join(W, f"{name}-f32.gguf")
        make_models.write_gguf(f32, name, cfg, tensors, "f32")

        mixes = m["variants"]
        if "ds4" not in mixes:
            for mix in mixes:
                write_mix(name, cfg, tensors, mix, {}, args.golden)
            continue
        # importance matrix: llama-imatrix on the same weights with a byte vocabulary
        spm = os.path.join(W, f"{name}-f32-bytevocab.gguf")
        make_models.write_gguf(spm, name, cfg, tensors, "f32", extra_kv=byte_vocab)
        calib = os.path.join(W, "calib.txt")
        with open(calib, "w") as f:
            f.write(calib_text())
        imatrix = os.path.join(W, f"{name}.imatrix.gguf")
        run([os.path.join(args.llama, "llama-imatrix"), "-m", spm, "-f", calib, "-o", imatrix,
             "-c", "128", "-b", "128", "--no-ppl", "-t", str(args.threads), "--chunks", "96",
             "--output-frequency", "1000000", "--save-frequency", "0"],
            os.path.join(W, "imatrix.log"))

        # routed experts IQ2_XXS / Q2_K with that matrix (everything else Q8_0 here, unused)
        lq = os.path.join(W, f"{name}-llama-quantize-iq2.gguf")
        # (the matrix is applied to the routed experts only: llama.cpp's grouped attn_output_a
        # collects rows of another width than the tensor's, which llama-quantize rejects)
        run([os.path.join(args.llama, "llama-quantize"), "--imatrix", imatrix,
             "--include-weights", "_exps.weight",
             "--tensor-type", "ffn_gate_exps=iq2_xxs", "--tensor-type", "ffn_up_exps=iq2_xxs",
             "--tensor-type", "ffn_down_exps=q2_k", f32, lq, "Q8_0", str(args.threads)],
            os.path.join(W, "quantize-iq2.log"))
        from_llama = read_raw(lq)

        for mix in mixes:
            if mix == "q4km":
                out = os.path.join(args.golden, "models", f"{name}-q4km.gguf")
                run([os.path.join(args.llama, "llama-quantize"), f32, out, "Q4_K_M",
                     str(args.threads)], os.path.join(W, "quantize-q4km.log"))
                print(f"wrote {out} ({os.path.getsize(out)} bytes)")
            else:
                write_mix(name, cfg, tensors, mix, from_llama, args.golden)


def write_mix(name, cfg, tensors, mix, from_llama, golden):
    types = MIXES[mix]
    encoded = {}
    for tname, arr in tensors:
        if arr.dtype == np.int32 or arr.ndim < 2:
            continue
        qt = types[tensor_class(tname)]
        if qt == QT.F32:
            continue
        if qt in GGUF_PY_TYPES:
            data = quantize(arr, qt)
            if qt in (QT.F16, QT.BF16):
                data = data.view(np.uint8).reshape(*arr.shape[:-1], -1)
        else:
            data, got = from_llama[tname]
            assert got == qt, f"{tname}: llama-quantize gave {got.name}, want {qt.name}"
        encoded[tname] = (data, qt)
    out = os.path.join(golden, "models", f"{name}-{mix}.gguf")
    make_models.write_gguf(out, name, cfg, tensors, mix, file_type=FILE_TYPE[mix], encoded=encoded)
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
