#!/usr/bin/env python3
"""Assembles tests/golden from the two oracles' outputs: copies the transformers reference,
the llama.cpp logits halo's comparison test uses, writes manifest.json and README.md with the
two-oracle agreement table.

Usage: assemble.py --ref DIR --llamacpp DIR --golden tests/golden
  --ref       output of reference.py (transformers)
  --llamacpp  output of llamacpp.py
Needs numpy only. Deterministic: same inputs, same bytes.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402

# llama.cpp logits committed for halo's comparison test (one variant keeps fixtures small).
COMMIT_LLAMACPP = ["tiny-a-f32"]
# per-position max|d| above this fraction of the reference range counts as divergent
DIVERGE_REL = 1e-3
MODE_TITLES = {
    "batch": "whole prompt in one decode call",
    "chunk37": "prompt in chunks of 37 tokens",
    "token": "one token per decode call",
    "upcast": "same F16-rounded weights stored as F32 (F32 activations in every matmul)",
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def f32(path, cols):
    return np.fromfile(path, dtype="<f4").reshape(-1, cols)


def seq_rows():
    out, off = [], 0
    for n in configs.SEQ_LENGTHS:
        out.append((configs.seq_name(n), n, off))
        off += n
    return out


def compare(ref, got, margins):
    """Per-sequence agreement: max|d|, relative to the reference's range, top-1 agreement and
    the first divergent position with the smallest margins recorded up to it."""
    res = []
    for name, n, off in seq_rows():
        r, g, m = ref[off:off + n], got[off:off + n], margins[off:off + n]
        d = np.abs(r.astype(np.float64) - g)
        rng = float(r.max() - r.min())
        per_pos = d.max(1)
        div = np.where(per_pos > DIVERGE_REL * rng)[0]
        e = dict(seq=name, max_abs=float(per_pos.max()), rel=float(per_pos.max() / rng),
                 top1=int((r.argmax(1) == g.argmax(1)).sum()), n=n)
        if len(div):
            p = int(div[0])
            e["first_divergent"] = p
            # JSON has no infinity: null means no top-k decision up to that position
            e["prefix_min_moe_margin"] = finite_or_none(m[:p + 1, 0].min())
            e["prefix_min_index_margin"] = finite_or_none(m[:p + 1, 1].min())
            e["prefix_min_index_margin_pos"] = int(m[:p + 1, 1].argmin())
            e["prefix_min_moe_margin_pos"] = int(m[:p + 1, 0].argmin())
        res.append(e)
    return res


def finite_or_none(x):
    return float(x) if np.isfinite(x) else None


def fmt(x):
    return "inf" if x is None else f"{x:.1e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True)
    ap.add_argument("--llamacpp", required=True)
    ap.add_argument("--golden", required=True)
    args = ap.parse_args()
    G = args.golden
    V = configs.VOCAB
    os.makedirs(os.path.join(G, "ref"), exist_ok=True)
    os.makedirs(os.path.join(G, "llamacpp"), exist_ok=True)

    rows = seq_rows()
    manifest = dict(
        format="halo-golden-1",
        vocab_size=V,
        tokens=dict(file="tokens.i32", dtype="int32 little-endian", count=sum(configs.SEQ_LENGTHS)),
        sequences=[dict(name=s, length=n, offset=o, seed=configs.SEQ_SEED_BASE + n)
                   for s, n, o in rows],
        layout=dict(
            logits="float32 little-endian, one row of vocab_size per position; the sequences' "
                   "positions concatenated in manifest order (row = sequence offset + position)",
            margins="float32 little-endian, two per position: smallest MoE routing margin "
                    "(k-th minus (k+1)-th of score+bias over the non-hash layers) and smallest "
                    "indexer margin (k-th minus (k+1)-th masked index score over the CSA layers); "
                    "+inf where no top-k choice was made",
            greedy_logits="float32 little-endian, one row per greedy step, the greedy runs in "
                          "manifest order; row i is the distribution that chose token i",
        ),
        greedy=[dict(prompt=s, steps=k, row=i * k) for i, (s, k) in enumerate(configs.GREEDY)],
        oracles=dict(
            transformers=dict(
                model="DeepseekV4ForCausalLM", device="CPU (H200 machine)", dtype="float32",
                attention="eager", experts="eager", threads=1, kv_cache="none (full forward per "
                "greedy step)", weights="the GGUF's tensors dequantized to float32 with gguf-py"),
            llamacpp=dict(
                version="v0.5.0 (git bundle in npm node-llama-cpp@3.22.1)",
                arch="deepseek4", device="CPU", kv_cache="F32", flash_attention=False,
                n_ubatch=4096, tool="tools/oracle/llama_dump.cpp"),
        ),
        models=[],
    )

    tables = []
    explain = []
    greedy_rows = []
    versions = None
    for name, m in configs.MODELS.items():
        me = dict(name=name, seed=m["seed"], config=m["config"], variants=[])
        for variant in configs.VARIANTS:
            mv = f"{name}-{variant}"
            gguf_path = os.path.join(G, "models", mv + ".gguf")
            with open(os.path.join(args.ref, mv + ".json")) as f:
                rj = json.load(f)
            versions = rj["versions"]
            for ext in ("logits.f32", "margins.f32", "greedy.f32"):
                shutil.copyfile(os.path.join(args.ref, f"{mv}.{ext}"), os.path.join(G, "ref", f"{mv}.{ext}"))
            ref = f32(os.path.join(G, "ref", mv + ".logits.f32"), V)
            mar = f32(os.path.join(G, "ref", mv + ".margins.f32"), 2)
            ve = dict(
                name=variant,
                gguf=f"models/{mv}.gguf", gguf_bytes=os.path.getsize(gguf_path), gguf_sha256=sha256(gguf_path),
                reference=dict(
                    logits=f"ref/{mv}.logits.f32", margins=f"ref/{mv}.margins.f32",
                    greedy_logits=f"ref/{mv}.greedy.f32",
                    greedy=[dict(prompt=g["prompt"], tokens=g["tokens"], top1_margins=g["top1_margins"])
                            for g in rj["greedy"]],
                    fp64_max_abs={s["name"]: s["fp64_max_abs"] for s in rj["sequences"]},
                    sha256={k: sha256(os.path.join(G, "ref", f"{mv}.{k}.f32"))
                            for k in ("logits", "margins", "greedy")},
                ),
                llamacpp=dict(agreement={}),
            )
            modes = ["batch", "chunk37", "token"] + (["upcast"] if variant != "f32" else [])
            agree = {}
            for mode in modes:
                got = f32(os.path.join(args.llamacpp, f"{mv}.llamacpp.{mode}.f32"), V)
                agree[mode] = compare(ref, got, mar)
                ve["llamacpp"]["agreement"][mode] = agree[mode]
            if mv in COMMIT_LLAMACPP:
                dst = os.path.join(G, "llamacpp", mv + ".logits.f32")
                shutil.copyfile(os.path.join(args.llamacpp, f"{mv}.llamacpp.batch.f32"), dst)
                ve["llamacpp"]["logits"] = f"llamacpp/{mv}.logits.f32"
                ve["llamacpp"]["sha256"] = sha256(dst)
            with open(os.path.join(args.llamacpp, f"{mv}.llamacpp.greedy.json")) as f:
                lg = json.load(f)
            ve["llamacpp"]["greedy"] = lg
            lgl = f32(os.path.join(args.llamacpp, f"{mv}.llamacpp.greedy.f32"), V)
            rgl = f32(os.path.join(G, "ref", mv + ".greedy.f32"), V)
            for i, (g, l) in enumerate(zip(rj["greedy"], lg)):
                k = len(g["tokens"])
                d = np.abs(rgl[i * k:(i + 1) * k].astype(np.float64) - lgl[i * k:(i + 1) * k]).max()
                diff = [j for j, (a, b) in enumerate(zip(g["tokens"], l["tokens"])) if a != b]
                first = (f"{diff[0]} (margin {fmt(g['top1_margins'][diff[0]])})" if diff else "-")
                greedy_rows.append(f"| {mv} | {g['prompt']} | {k} | {k - len(diff)}/{k} | {first} | "
                                   f"{fmt(d)} | {fmt(min(g['top1_margins']))} |")
            me["variants"].append(ve)

            # table for this variant
            t = [f"#### {mv}", "",
                 "| length | max abs | rel | top-1 | chunk37 rel | token rel |"
                 + (" upcast rel |" if "upcast" in modes else "") + " fp32 vs fp64 |",
                 "|---:|---:|---:|---:|---:|---:|" + ("---:|" if "upcast" in modes else "") + "---:|"]
            for i, (s, n, o) in enumerate(rows):
                b = agree["batch"][i]
                line = (f"| {n} | {fmt(b['max_abs'])} | {fmt(b['rel'])} | {b['top1']}/{n} | "
                        f"{fmt(agree['chunk37'][i]['rel'])} | {fmt(agree['token'][i]['rel'])} |")
                if "upcast" in modes:
                    line += f" {fmt(agree['upcast'][i]['rel'])} |"
                line += f" {fmt(rj['sequences'][i]['fp64_max_abs'])} |"
                t.append(line)
            tables.append("\n".join(t))
            for mode in modes:
                for e in agree[mode]:
                    if "first_divergent" in e:
                        explain.append(
                            f"| {mv} | {mode} | {e['seq']} | {e['first_divergent']} | "
                            f"{fmt(e['rel'])} | {e['top1']}/{e['n']} | "
                            f"{fmt(e['prefix_min_index_margin'])} @ {e['prefix_min_index_margin_pos']} | "
                            f"{fmt(e['prefix_min_moe_margin'])} @ {e['prefix_min_moe_margin_pos']} |")
        manifest["models"].append(me)
    manifest["oracles"]["transformers"]["versions"] = versions

    with open(os.path.join(G, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, allow_nan=False)
        f.write("\n")

    readme = README.format(
        tables="\n\n".join(tables),
        explain="\n".join(explain) if explain else "| (none) | | | | | | | |",
        greedy="\n".join(greedy_rows),
        diverge=DIVERGE_REL,
        torch=versions["torch"], transformers=versions["transformers"], numpy=versions["numpy"],
    )
    with open(os.path.join(G, "README.md"), "w") as f:
        f.write(readme)
    print("wrote", os.path.join(G, "manifest.json"), "and README.md")


README = """# Golden fixtures: tiny DeepSeek V4 models and their expected outputs

Generated by `tools/oracle/` (see `tools/oracle/README.md` for the exact commands); do not edit
by hand. Everything here is little-endian and described by `manifest.json`.

| path | what |
|---|---|
| `models/tiny-{{a,yarn}}-{{f32,f16}}.gguf` | tiny models with the real `deepseek4` architecture and seeded random weights, in the tensor layout llama.cpp and ds4 share |
| `tokens.i32` | the token sequences (lengths 1, 7, 64, 127, 128, 129, 300, 520, 1100), concatenated |
| `ref/<model>-<variant>.logits.f32` | transformers' logits at every position of every sequence |
| `ref/<model>-<variant>.margins.f32` | per position: smallest MoE routing margin and smallest indexer top-k margin |
| `ref/<model>-<variant>.greedy.f32` | transformers' logits at each step of the greedy continuations |
| `llamacpp/tiny-a-f32.logits.f32` | llama.cpp's logits for tiny-a f32 (the second oracle, for the comparison library's own test) |
| `manifest.json` | shapes, offsets, seeds, configs, checksums, oracle versions and settings, greedy tokens, full agreement data |
| `golden.h`, `golden.c` | the C comparison library tests use (`halo_golden`), `test_golden.c` its test |

Models: `tiny-a` (hidden 128, 6 layers with compress ratios 0 0 4 128 4 128, 3 hash-routed
layers, hc 4, 4 heads of 128 with a 32-dim rope tail, 2 output groups, 8 experts top-2 plus one
shared, SwiGLU clamp 1.25, 64 indexer heads of 64, index top-k 8, window 128) and `tiny-yarn`
(the same with YaRN on the compressed layers — factor 8 over an original context of 256, betas
32/1 — 16 experts top-4, index top-k 16, window 64). Vocabulary 256, `tokenizer.ggml.model =
no_vocab`. Variants: `f32` (every tensor F32) and `f16` (every tensor of two or more dimensions
F16, vectors F32, hash tables I32). The reference for each variant runs on exactly that file's
weights (dequantized to float32), so `f16` expectations are not `f32` ones.

Oracles: transformers {transformers} (torch {torch}, numpy {numpy}) `DeepseekV4ForCausalLM`,
float32, eager attention, eager experts, CPU, one thread, no KV cache; llama.cpp v0.5.0
`deepseek4`, CPU, F32 KV cache, flash attention off.

## Using the fixtures from C

```c
#include "golden/golden.h"   /* link halo_golden */

halo_golden *g; halo_error err;
halo_golden_open("tests/golden", &g, &err);               /* tests run from the repo root */
const halo_golden_variant *v;
halo_golden_variant_get(g, "tiny-yarn", "f16", &v, &err);  /* v->gguf_path is the model */
const halo_golden_seq *s = halo_golden_seq_find(g, "L520"); /* s->tokens, s->length */
/* ... run the model on s->tokens, logits in got[s->length * v->n_vocab] ... */
halo_golden_cmp c;
halo_golden_compare_seq(v, s, got, 1e-3, &c);              /* tolerance relative to the range */
if (c.first_bad >= 0 && !halo_golden_near_tie(&c, 1e-5f)) {{ /* a real disagreement */ }}
char line[512]; halo_golden_format(&c, line, sizeof line); /* max|d|, rel, top-1, first bad + margins */
halo_golden_close(g);
```

`v->greedy[i]` holds the greedy runs (prompt name, transformers' and llama.cpp's tokens, the
top-1 margins) and `v->greedy_logits` their step logits; `v->llama_logits` is non-NULL for the
variant whose llama.cpp logits are committed.

## Two-oracle agreement

`rel` is max |Δ| over a sequence divided by the range (max − min) of the reference logits of
that sequence; `top-1` counts positions whose argmax agrees. Columns after `top-1` repeat `rel`
for llama.cpp fed the prompt in chunks of 37 tokens and one token per call, and (F16 variants)
for llama.cpp running the same F16-rounded weights stored as F32. The last column is transformers'
own float32-vs-float64 difference (max abs), the size of float32 rounding.

{tables}

### Greedy continuations

Each transformers step is a full forward of the growing sequence; llama.cpp decodes one token
per call after the prompt (F16 variants with their native F16 weights). Once the two runs pick
different tokens their later steps continue different sequences, so the step-logit difference
after that point is not an agreement measure.

| model | prompt | steps | same tokens | first different step (transformers' top-1 margin there) | max abs Δ of step logits | smallest top-1 margin |
|---|---|---:|---:|---:|---:|---:|
{greedy}

### Differences explained

With F32 weights the two oracles agree to float32 rounding at every position of every length,
batched, chunked or token by token (rel ≤ 2e-6, the size of transformers' own fp32-vs-fp64
difference), and produce the same greedy tokens.

With F16 weights llama.cpp's CPU matmul rounds the activations to F16 before multiplying (ggml's
`vec_dot_type` for F16 weights); transformers multiplies the same F16-rounded weights in float32.
That alone moves logits by ~3e-4 of their range (rows with short sequences). Once the
perturbation meets a near-tie in a top-k decision (indexer selection or MoE routing) the
decision flips and the positions that depend on it move by up to ~1e-1. The `upcast` column
removes the activation rounding (llama.cpp on the same weights stored as F32): agreement returns
to float32 rounding, except where a recorded margin is itself at float32 rounding size.
Greedy runs are affected the same way: a run with F16 weights parts where transformers' top-1
margin is below the F16 activation rounding of the step logits (a few 1e-3 here).

Every sequence with a position whose max |Δ| exceeds {diverge} of the range, with the first such
position and the smallest recorded margins at or before it (value @ position):

| model | llama.cpp mode | sequence | first divergent position | rel | top-1 | indexer margin | MoE margin |
|---|---|---|---:|---:|---:|---:|---:|
{explain}

A flip needs a margin comparable to the perturbation: ~1e-6 for float32 rounding, ~1e-3 for
F16 activations. Comparisons should therefore report the margins (the library does) and accept a
divergence that starts at a position whose prefix holds a margin that small, rather than widen
tolerances everywhere.
"""

if __name__ == "__main__":
    main()
