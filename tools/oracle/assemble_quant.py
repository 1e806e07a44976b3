#!/usr/bin/env python3
"""Adds the quantized variants to tests/golden after assemble.py: copies transformers' logits and
margins for configs.QUANT_SEQS, adds each variant to manifest.json (with its sequence subset,
tensor types and llama.cpp's agreement figures, which halo's test compares itself with) and
appends the quantized agreement tables to README.md. Run it after assemble.py (which rewrites
both files); rerunning it replaces what it added before.

Usage: assemble_quant.py --ref DIR --llamacpp DIR --golden tests/golden
  --ref       output of reference.py --quant (transformers)
  --llamacpp  output of llamacpp.py --quant
Needs numpy and gguf-py. Deterministic: same inputs, same bytes.
"""
import argparse
import collections
import json
import os
import shutil
import sys

import numpy as np

import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402
from assemble import DIVERGE_REL, f32, finite_or_none, fmt, sha256  # noqa: E402

MODES = ["batch", "chunk37", "token", "dequant"]
# a quantized run's position is a flip (not noise) when its max |d| exceeds this many times the
# sequence's median (the activation-quantization noise)
FLIP_FACTOR = 4.0
MARK = "<!-- quantized variants: tools/oracle/assemble_quant.py -->"


def seq_rows():
    lengths = {configs.seq_name(n): n for n in configs.SEQ_LENGTHS}
    out, row = [], 0
    for s in configs.QUANT_SEQS:
        out.append((s, lengths[s], row))
        row += lengths[s]
    return out


def compare(ref, got, margins):
    """As assemble.compare, over the stored subset, plus the median over positions of the
    per-position max |d| relative to the range (the size of activation-quantization noise, which
    a flip at a near-tie does not move)."""
    res = []
    for name, n, off in seq_rows():
        r, g, m = ref[off:off + n], got[off:off + n], margins[off:off + n]
        d = np.abs(r.astype(np.float64) - g)
        rng = float(r.max() - r.min())
        per_pos = d.max(1)
        med = float(np.median(per_pos))
        div = np.where(per_pos > DIVERGE_REL * rng)[0]
        flips = np.where(per_pos > FLIP_FACTOR * med)[0]
        e = dict(seq=name, max_abs=float(per_pos.max()), rel=float(per_pos.max() / rng),
                 median_rel=med / rng, top1=int((r.argmax(1) == g.argmax(1)).sum()), n=n,
                 flip_positions=int(len(flips)))
        if len(flips):
            p = int(flips[0])
            e["first_flip"] = p
            e["first_flip_moe_margin"] = finite_or_none(m[:p + 1, 0].min())
            e["first_flip_index_margin"] = finite_or_none(m[:p + 1, 1].min())
            e["first_flip_moe_margin_pos"] = int(m[:p + 1, 0].argmin())
            e["first_flip_index_margin_pos"] = int(m[:p + 1, 1].argmin())
        if len(div):
            p = int(div[0])
            e["first_divergent"] = p
            e["prefix_min_moe_margin"] = finite_or_none(m[:p + 1, 0].min())
            e["prefix_min_index_margin"] = finite_or_none(m[:p + 1, 1].min())
            e["prefix_min_index_margin_pos"] = int(m[:p + 1, 1].argmin())
            e["prefix_min_moe_margin_pos"] = int(m[:p + 1, 0].argmin())
        res.append(e)
    return res


def tensor_types(path):
    """{type name: [tensor count, bytes]} of a GGUF, and its general.file_type."""
    r = gguf.GGUFReader(path)
    c = collections.OrderedDict()
    for t in sorted(r.tensors, key=lambda t: t.tensor_type.name):
        e = c.setdefault(t.tensor_type.name, [0, 0])
        e[0] += 1
        e[1] += int(t.n_bytes)
    ft = r.fields.get("general.file_type")
    return c, (int(ft.contents()) if ft else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True)
    ap.add_argument("--llamacpp", required=True)
    ap.add_argument("--golden", required=True)
    args = ap.parse_args()
    G = args.golden
    V = configs.VOCAB
    with open(os.path.join(G, "manifest.json")) as f:
        manifest = json.load(f)
    manifest["models"] = [m for m in manifest["models"] if m["name"] not in configs.QUANT_MODELS]
    manifest["quantized"] = dict(
        sequences=configs.QUANT_SEQS,
        made_by="tools/oracle/make_quant.py (llama.cpp v0.5.0 llama-quantize / llama-imatrix, "
                "gguf-py quantizers)",
        llamacpp_modes=dict(
            batch="whole prompt in one decode call", chunk37="prompt in chunks of 37 tokens",
            token="one token per decode call",
            dequant="the same file with every tensor dequantized to F32 by gguf-py: no "
                    "activation quantization, the precise-mode counterpart"),
        median_rel="median over a sequence's positions of max |d| at the position / range of "
                   "the reference logits of the sequence",
    )
    tables, explain = [], []
    rows = seq_rows()
    for name, m in configs.QUANT_MODELS.items():
        me = dict(name=name, seed=m["seed"], config=m["config"], variants=[])
        for variant in m["variants"]:
            mv = f"{name}-{variant}"
            gguf_path = os.path.join(G, "models", mv + ".gguf")
            with open(os.path.join(args.ref, mv + ".json")) as f:
                rj = json.load(f)
            for ext in ("logits.f32", "margins.f32"):
                shutil.copyfile(os.path.join(args.ref, f"{mv}.{ext}"),
                                os.path.join(G, "ref", f"{mv}.{ext}"))
            ref = f32(os.path.join(G, "ref", mv + ".logits.f32"), V)
            mar = f32(os.path.join(G, "ref", mv + ".margins.f32"), 2)
            assert ref.shape[0] == sum(n for _, n, _ in rows), mv
            types, ftype = tensor_types(gguf_path)
            ve = dict(
                name=variant, description=configs.QUANT_VARIANTS[variant],
                gguf=f"models/{mv}.gguf", gguf_bytes=os.path.getsize(gguf_path),
                gguf_sha256=sha256(gguf_path), file_type=ftype,
                tensor_types={k: dict(tensors=v[0], bytes=v[1]) for k, v in types.items()},
                sequences=configs.QUANT_SEQS,
                reference=dict(
                    logits=f"ref/{mv}.logits.f32", margins=f"ref/{mv}.margins.f32",
                    fp64_max_abs={s["name"]: s["fp64_max_abs"] for s in rj["sequences"]},
                    sha256={k: sha256(os.path.join(G, "ref", f"{mv}.{k}.f32"))
                            for k in ("logits", "margins")},
                ),
                llamacpp=dict(agreement={}),
            )
            agree = {}
            for mode in MODES:
                got = f32(os.path.join(args.llamacpp, f"{mv}.llamacpp.{mode}.f32"), V)
                agree[mode] = compare(ref, got, mar)
                ve["llamacpp"]["agreement"][mode] = agree[mode]
            me["variants"].append(ve)

            mix = ", ".join(f"{k} {v[0]}" for k, v in types.items())
            t = [f"#### {mv} ({os.path.getsize(gguf_path)} bytes: {mix} tensors)", "",
                 "| length | max abs | rel | median rel | top-1 | chunk37 rel | token rel | "
                 "dequant rel | dequant top-1 | fp32 vs fp64 |",
                 "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for i, (s, n, o) in enumerate(rows):
                b, dq = agree["batch"][i], agree["dequant"][i]
                t.append(f"| {n} | {fmt(b['max_abs'])} | {fmt(b['rel'])} | {fmt(b['median_rel'])} | "
                         f"{b['top1']}/{n} | {fmt(agree['chunk37'][i]['rel'])} | "
                         f"{fmt(agree['token'][i]['rel'])} | {fmt(dq['rel'])} | {dq['top1']}/{n} | "
                         f"{fmt(rj['sequences'][i]['fp64_max_abs'])} |")
            tables.append("\n".join(t))
            for mode in MODES:
                for e in agree[mode]:
                    if mode == "dequant" and "first_divergent" in e:
                        explain.append(
                            f"| {mv} | {mode} | {e['seq']} | first > {DIVERGE_REL} of the range: "
                            f"{e['first_divergent']} | {fmt(e['rel'])} | {e['top1']}/{e['n']} | "
                            f"{fmt(e['prefix_min_index_margin'])} @ {e['prefix_min_index_margin_pos']} | "
                            f"{fmt(e['prefix_min_moe_margin'])} @ {e['prefix_min_moe_margin_pos']} |")
                    elif mode != "dequant" and "first_flip" in e:
                        explain.append(
                            f"| {mv} | {mode} | {e['seq']} | {e['first_flip']} "
                            f"({e['flip_positions']} positions) | {fmt(e['rel'])} | "
                            f"{e['top1']}/{e['n']} | "
                            f"{fmt(e['first_flip_index_margin'])} @ {e['first_flip_index_margin_pos']} | "
                            f"{fmt(e['first_flip_moe_margin'])} @ {e['first_flip_moe_margin_pos']} |")
        manifest["models"].append(me)

    with open(os.path.join(G, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, allow_nan=False)
        f.write("\n")
    readme_path = os.path.join(G, "README.md")
    with open(readme_path) as f:
        readme = f.read()
    readme = readme.split("\n" + MARK)[0].rstrip("\n") + "\n"
    readme += "\n" + MARK + "\n" + README.format(
        seqs=", ".join(configs.QUANT_SEQS), tables="\n\n".join(tables),
        explain="\n".join(explain) if explain else "| (none) | | | | | | | |",
        diverge=DIVERGE_REL, flip=FLIP_FACTOR)
    with open(readme_path, "w") as f:
        f.write(readme)
    print("added", ", ".join(f"{n}-{v}" for n, m in configs.QUANT_MODELS.items()
                              for v in m["variants"]), "to", G)


README = """
## Quantized variants

| path | what |
|---|---|
| `models/tiny-q-ds4.gguf` | tiny-q in ds4's q2 mix: IQ2_XXS routed gate/up and Q2_K routed down (llama-quantize with an importance matrix from llama-imatrix), Q8_0 attention projections / shared expert / output, F16 embedding / router / compressor / indexer / HC mixers, F32 vectors |
| `models/tiny-q-q4km.gguf` | tiny-q through `llama-quantize ... Q4_K_M`: Q4_K, Q6_K, and Q5_0 where rows are not multiples of 256 (its fallback), F32 vectors and router |
| `models/tiny-m-mxfp4.gguf` | tiny-m in llama.cpp's converter mix: MXFP4 routed experts, Q8_0 attention / shared expert / indexer q_b, BF16 embedding / output / router / compressor / indexer proj, F32 HC mixers / compressor position bias / vectors |
| `ref/<model>-<mix>.{{logits,margins}}.f32` | transformers on exactly those weights (dequantized to float32 by gguf-py), for the sequences {seqs} only |

Models: `tiny-q` has hidden size and expert width 256 (K- and i-quants store rows of 256
values), two layers — compressed sparse attention (ratio 4, 64 indexer heads of 64, top-k 8,
hash-routed MoE) and heavily compressed attention (ratio 128, learned routing) — two heads of 64
with a 32-dim rope tail, 2 output groups, 4 experts top-2 plus one shared, hc 4, sinks,
vocabulary 256. `tiny-m` is the same at hidden 128 and expert width 32 (MXFP4, Q8_0 and BF16
work in blocks of 32). They are that small for the 40 MiB budget of this folder: at hidden 256
every tensor that reads the residual stream doubles, and tiny-a's six layers in the three mixes
would take ~25 MB. `manifest.json` lists each file's tensor types and bytes, and for each
variant the `sequences` whose reference it stores: from C, `halo_golden_variant_has_seq` says
whether a sequence is stored, `halo_golden_compare_seq` finds its rows, and
`halo_golden_llama_figures` returns llama.cpp's figures below (`tests/model/test_forward_quant.c`
uses them).

llama.cpp (CPU, F32 KV cache, no flash attention) against transformers: `rel` is max |Δ| over
the sequence divided by the range of the reference logits, `median rel` the median over
positions of each position's max |Δ| (the size of the activation quantization, which a flip at a
near-tie does not move). llama.cpp quantizes activations for its dot products (Q8_0 for Q8_0,
MXFP4 and the 32-blocks, Q8_K for K- and i-quants, F16 / BF16 for F16 / BF16 weights);
`dequant` is llama.cpp on the same file with every tensor dequantized to F32 (no activation
rounding), which agrees with transformers to float32 rounding: the whole difference of the
quantized run is ggml's activation quantization. These figures are in `manifest.json`
(`llamacpp.agreement`, with `median_rel`) for halo's test to compare its fast mode with.

{tables}

Where the quantized runs move beyond their noise: every sequence with a position whose max |Δ|
exceeds {flip:g} times the sequence's median (the activation-quantization noise, itself ~5e-3 of
the range, so every quantized run exceeds {diverge} of the range everywhere), with the first such
position, how many there are, and the smallest recorded margins at or before it (value @
position); for `dequant`, every sequence with a position beyond {diverge} of the range.

| model | llama.cpp mode | sequence | first position beyond the noise | rel | top-1 | indexer margin | MoE margin |
|---|---|---|---:|---:|---:|---:|---:|
{explain}

Top-1 disagreements of the quantized runs are at positions whose reference top-2 logits are
closer than the activation-quantization noise (~5e-3 of the range, ~0.1 in logits here); the
large `rel` values of some sequences come from top-k flips (indexer selection or MoE routing)
at near-ties, after which the positions that depend on that choice move by up to ~1e-1.
"""

if __name__ == "__main__":
    main()
