#!/usr/bin/env python3
"""Runs llama.cpp (llama_dump, CPU, F32 KV cache, no flash attention) on the golden models.

For every model variant and every token sequence it records the logits of all positions three
ways: the whole prompt in one decode call ("batch"), in chunks of 37 tokens ("chunk37") and
one token per call ("token"), plus the greedy continuations of configs.GREEDY. For variants
with F16 weights it also runs an F32 copy of the same (F16-rounded) weights ("upcast"): ggml's
CPU matmul rounds activations to F16 when the weights are F16, transformers does not, so this
row separates that rounding from any other difference.
Writes OUT/<model>-<variant>.llamacpp.{batch,chunk37,token,upcast,greedy}.f32 and
OUT/<model>-<variant>.llamacpp.greedy.json.

With --quant it runs the quantized variants instead (configs.QUANT_MODELS, sequences
configs.QUANT_SEQS, no greedy runs): batch, chunk37, token, and "dequant" -- the same file with
every quantized tensor dequantized to F32 by gguf-py (what transformers multiplies), which
separates llama.cpp's activation quantization (Q8_0 / Q8_K, F16 / BF16 rounding) from the rest.

Usage: llamacpp.py --dump PATH/llama_dump --models DIR --tokens FILE --out DIR [--threads N]
                   [--quant]
Needs numpy and gguf-py.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402
import make_models  # noqa: E402

MODES = [("batch", 0), ("chunk37", 37), ("token", 1)]


def sequences(tokens):
    seqs, off = [], 0
    for n in configs.SEQ_LENGTHS:
        seqs.append((configs.seq_name(n), tokens[off:off + n].tolist()))
        off += n
    return seqs


def run(dump, model, jobs, threads, chunk, tmp):
    jf = os.path.join(tmp, "jobs.txt")
    with open(jf, "w") as f:
        f.write("".join(jobs))
    cmd = [dump, "--model", model, "--jobs", jf, "--out", tmp, "--threads", str(threads),
           "--chunk", str(chunk)]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)


def upcast_copy(src, dst, name):
    """Writes src (F16 weights) again with every F16 tensor widened to F32, same order."""
    r = gguf.GGUFReader(src)
    tensors = []
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        if t.tensor_type == gguf.GGMLQuantizationType.F16:
            arr = np.array(t.data, dtype=np.float16).astype(np.float32).reshape(shape)
        else:
            arr = np.array(t.data).reshape(shape)
        tensors.append((t.name, arr))
    make_models.write_gguf(dst, name, configs.MODELS[name]["config"], tensors, "f32")


def dequant_copy(src, dst, name, cfg):
    """Writes src again with every tensor stored as F32 (I32 kept), values dequantized."""
    from gguf.quants import dequantize
    r = gguf.GGUFReader(src)
    tensors = []
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        if t.tensor_type == gguf.GGMLQuantizationType.I32:
            arr = np.array(t.data, dtype=np.int32).reshape(shape)
        else:
            arr = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        tensors.append((t.name, arr))
    make_models.write_gguf(dst, name, cfg, tensors, "f32")


def main_quant(args, tokens):
    d = dict(sequences(tokens))
    seqs = [(s, d[s]) for s in configs.QUANT_SEQS]
    V = configs.VOCAB
    for name, m in configs.QUANT_MODELS.items():
        for variant in m["variants"]:
            model = os.path.join(args.models, f"{name}-{variant}.gguf")
            base = os.path.join(args.out, f"{name}-{variant}.llamacpp")
            for mode, chunk in MODES + [("dequant", 0)]:
                with tempfile.TemporaryDirectory() as tmp:
                    jobs = [f"logits {s} {' '.join(map(str, ids))}\n" for s, ids in seqs]
                    mpath = model
                    if mode == "dequant":
                        mpath = os.path.join(tmp, "dequant.gguf")
                        dequant_copy(model, mpath, name, m["config"])
                    run(args.dump, mpath, jobs, args.threads, chunk, tmp)
                    rows = [np.fromfile(os.path.join(tmp, s + ".f32"), dtype="<f4").reshape(-1, V)
                            for s, _ in seqs]
                np.concatenate(rows).astype("<f4").tofile(f"{base}.{mode}.f32")
            print(f"{name}-{variant}: done", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quant", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tokens = np.fromfile(args.tokens, dtype="<i4")
    if args.quant:
        return main_quant(args, tokens)
    seqs = sequences(tokens)
    V = configs.VOCAB
    for name in configs.MODELS:
        for variant in configs.VARIANTS:
            model = os.path.join(args.models, f"{name}-{variant}.gguf")
            base = os.path.join(args.out, f"{name}-{variant}.llamacpp")
            modes = MODES + ([("upcast", 0)] if variant != "f32" else [])
            for mode, chunk in modes:
                with tempfile.TemporaryDirectory() as tmp:
                    jobs = [f"logits {s} {' '.join(map(str, ids))}\n" for s, ids in seqs]
                    m = model
                    if mode == "upcast":
                        m = os.path.join(tmp, "upcast.gguf")
                        upcast_copy(model, m, name)
                    run(args.dump, m, jobs, args.threads, chunk, tmp)
                    rows = [np.fromfile(os.path.join(tmp, s + ".f32"), dtype="<f4").reshape(-1, V)
                            for s, _ in seqs]
                np.concatenate(rows).astype("<f4").tofile(f"{base}.{mode}.f32")
            with tempfile.TemporaryDirectory() as tmp:
                d = dict(seqs)
                jobs = [f"greedy G{s} {n} {' '.join(map(str, d[s]))}\n" for s, n in configs.GREEDY]
                run(args.dump, model, jobs, args.threads, 0, tmp)
                g, rows = [], []
                for s, n in configs.GREEDY:
                    with open(os.path.join(tmp, f"G{s}.txt")) as f:
                        g.append(dict(prompt=s, tokens=[int(x) for x in f.read().split()]))
                    rows.append(np.fromfile(os.path.join(tmp, f"G{s}.f32"), dtype="<f4"))
            np.concatenate(rows).astype("<f4").tofile(f"{base}.greedy.f32")
            with open(f"{base}.greedy.json", "w") as f:
                json.dump(g, f)
            print(f"{name}-{variant}: done", flush=True)


if __name__ == "__main__":
    main()
