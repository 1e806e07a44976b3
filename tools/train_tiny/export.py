#!/usr/bin/env python3
"""Writes the trained model as a GGUF in the golden fixtures' layout, with its vocabulary.

The tensor layout is tools/oracle's: names, shapes, metadata keys and storage rule come from
tools/oracle/make_models.py (`make_weights` for the list of tensors in file order, `write_gguf`
with the "f16" rule: every float tensor of 2+ dims F16, 1-D F32, hash tables I32). The
transformers -> GGUF name mapping is the inverse of tools/oracle/reference.py's `hf_state_dict`;
`check_roundtrip` proves it by mapping back with that function (train.py runs it on the trained
weights before writing). The only addition to make_models' file is the tokenizer: gpt2-style BPE
metadata (tokenizer.ggml.*) from the HF tokenizer.json, in place of "no_vocab".

Numpy and gguf-py only (no torch):
  export.py TOKENIZER.json OUT.gguf {f16|q8_0} NPZ...
      (NPZ: parts of the transformers state dict as numpy arrays, e.g. train.py's
      ckpt_experts.npz and ckpt_rest.npz)
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import config  # noqa: E402
import make_models  # noqa: E402  (tools/oracle)

import gguf  # noqa: E402


DESCRIPTION = "halo's embedded default model: a tiny DeepSeek V4 trained on the KJV"


def gguf_tensors(cfg, sd):
    """transformers state dict (name -> numpy) -> [(gguf name, array)] in make_models' order."""
    g = {
        "token_embd.weight": sd["model.embed_tokens.weight"],
        "output.weight": sd["lm_head.weight"],
        "output_norm.weight": sd["model.norm.weight"],
        "output_hc_fn.weight": sd["model.hc_head.hc_fn"],
        "output_hc_base.weight": sd["model.hc_head.hc_base"],
        "output_hc_scale.weight": sd["model.hc_head.hc_scale"],
    }
    for il, r in enumerate(cfg["compress_ratios"]):
        b, p = f"blk.{il}.", f"model.layers.{il}."
        a, m = p + "self_attn.", p + "mlp."
        gu = sd[m + "experts.gate_up_proj"]
        half = gu.shape[1] // 2
        g.update({
            b + "attn_norm.weight": sd[p + "input_layernorm.weight"],
            b + "ffn_norm.weight": sd[p + "post_attention_layernorm.weight"],
            b + "attn_sinks.weight": sd[a + "sinks"],
            b + "attn_q_a.weight": sd[a + "q_a_proj.weight"],
            b + "attn_q_a_norm.weight": sd[a + "q_a_norm.weight"],
            b + "attn_q_b.weight": sd[a + "q_b_proj.weight"],
            b + "attn_kv.weight": sd[a + "kv_proj.weight"],
            b + "attn_kv_a_norm.weight": sd[a + "kv_norm.weight"],
            b + "attn_output_a.weight": sd[a + "o_a_proj.weight"],
            b + "attn_output_b.weight": sd[a + "o_b_proj.weight"],
            b + "ffn_gate_inp.weight": sd[m + "gate.weight"],
            b + "ffn_gate_exps.weight": gu[:, :half],
            b + "ffn_up_exps.weight": gu[:, half:],
            b + "ffn_down_exps.weight": sd[m + "experts.down_proj"],
            b + "ffn_gate_shexp.weight": sd[m + "shared_experts.gate_proj.weight"],
            b + "ffn_up_shexp.weight": sd[m + "shared_experts.up_proj.weight"],
            b + "ffn_down_shexp.weight": sd[m + "shared_experts.down_proj.weight"],
        })
        for hc in ("attn", "ffn"):
            g[b + f"hc_{hc}_fn.weight"] = sd[p + f"{hc}_hc.fn"]
            g[b + f"hc_{hc}_base.weight"] = sd[p + f"{hc}_hc.base"]
            g[b + f"hc_{hc}_scale.weight"] = sd[p + f"{hc}_hc.scale"]
        if il < cfg["num_hash_layers"]:
            g[b + "ffn_gate_tid2eid.weight"] = sd[m + "gate.tid2eid"].astype(np.int32)
        else:
            g[b + "exp_probs_b.bias"] = sd[m + "gate.e_score_correction_bias"]
        if r:
            c = a + "compressor."
            g.update({
                b + "attn_compressor_kv.weight": sd[c + "kv_proj.weight"],
                b + "attn_compressor_gate.weight": sd[c + "gate_proj.weight"],
                b + "attn_compressor_ape.weight": sd[c + "position_bias"],
                b + "attn_compressor_norm.weight": sd[c + "kv_norm.weight"],
            })
            if r == 4:
                x = c + "indexer."
                g.update({
                    b + "indexer_compressor_kv.weight": sd[x + "kv_proj.weight"],
                    b + "indexer_compressor_gate.weight": sd[x + "gate_proj.weight"],
                    b + "indexer_compressor_ape.weight": sd[x + "position_bias"],
                    b + "indexer_compressor_norm.weight": sd[x + "kv_norm.weight"],
                    b + "indexer.attn_q_b.weight": sd[x + "q_b_proj.weight"],
                    b + "indexer.proj.weight": sd[x + "scorer.weights_proj.weight"],
                })
    # file order, names and shapes exactly as make_models lays out a model of this config
    layout = make_models.make_weights(cfg, 0)
    assert set(g) == {n for n, _ in layout}, set(g) ^ {n for n, _ in layout}
    out = []
    for name, ref in layout:
        arr = np.ascontiguousarray(g[name])
        assert arr.shape == ref.shape, (name, arr.shape, ref.shape)
        out.append((name, arr if arr.dtype == np.int32 else arr.astype(np.float32)))
    return out


def check_roundtrip(cfg, sd, tensors, hf_state_dict):
    """hf_state_dict is tools/oracle/reference.py's mapping (GGUF -> transformers names). Mapping
    the exported tensors back must give every transformers tensor bit for bit."""
    back = hf_state_dict(cfg, dict(tensors))
    assert set(back) == set(sd), set(back) ^ set(sd)
    for k, v in back.items():
        v = np.asarray(v)
        assert v.shape == sd[k].shape and np.array_equal(v, np.asarray(sd[k]).astype(v.dtype)), k


def looks_special(s):
    return ((s.startswith("<｜") and s.endswith("｜>")) or (s.startswith("<") and s.endswith(">"))
            or s == "｜DSML｜")


def tokenizer_metadata(tokenizer_json):
    """tokenizer.json (HF, BPE) -> (tokens, token types, merges) as llama.cpp's converter lays
    them out: id order, special tokens CONTROL, the rest NORMAL."""
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    assert model["type"] == "BPE", model["type"]
    n = len(model["vocab"])
    for a in tj["added_tokens"]:
        n = max(n, a["id"] + 1)
    tokens = [None] * n
    types = [gguf.TokenType.NORMAL] * n
    for text, i in model["vocab"].items():
        tokens[i] = text
    for a in tj["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = (gguf.TokenType.CONTROL if a["special"] or looks_special(a["content"])
                          else gguf.TokenType.USER_DEFINED)
    assert all(t is not None for t in tokens), "vocabulary ids are not contiguous"
    merges = model["merges"]
    if merges and not isinstance(merges[0], str):
        merges = [" ".join(m) for m in merges]
    return tokens, [int(t) for t in types], merges


def write(path, cfg, tensors, tokenizer_json, description="", quant="f16"):
    """quant "f16": make_models' f16 rule. "q8_0": the tensors that rule makes F16 are stored
    Q8_0 instead (blocks of 32 along rows; every row length here is a multiple of 32)."""
    tokens, types, merges = tokenizer_metadata(tokenizer_json)
    assert len(tokens) == cfg["vocab_size"], (len(tokens), cfg["vocab_size"])
    for i, s in enumerate(config.SPECIAL_TOKENS):
        assert tokens[i] == s and types[i] == gguf.TokenType.CONTROL, (i, tokens[i])

    class Writer(gguf.GGUFWriter):
        # make_models.write_gguf writes "no_vocab"; this model carries its vocabulary
        def add_tokenizer_model(self, model):
            super().add_tokenizer_model("gpt2")
            self.add_tokenizer_pre("deepseek-v3")
            self.add_token_list(tokens)
            self.add_token_types(types)
            self.add_token_merges(merges)
            self.add_bos_token_id(config.BOS_ID)
            self.add_eos_token_id(config.EOS_ID)
            self.add_pad_token_id(config.PAD_ID)
            self.add_add_bos_token(True)
            self.add_add_eos_token(False)
            self.add_license("public-domain (training text: King James Bible)")
            if description:
                self.add_description(description)

        def add_file_type(self, ftype):
            super().add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quant == "q8_0" else ftype)

        def add_tensor(self, name, tensor, *a, **kw):
            if quant == "q8_0" and tensor.dtype == np.float16:
                q = gguf.quants.quantize(tensor.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
                return super().add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            return super().add_tensor(name, tensor, *a, **kw)

    saved = make_models.gguf.GGUFWriter
    make_models.gguf.GGUFWriter = Writer
    try:
        make_models.write_gguf(path, config.NAME, cfg, tensors, "f16")
    finally:
        make_models.gguf.GGUFWriter = saved
    return os.path.getsize(path)


def main():
    if len(sys.argv) < 5 or sys.argv[3] not in ("f16", "q8_0"):
        sys.exit(__doc__)
    tok, out, quant = sys.argv[1:4]
    sd = {}
    for f in sys.argv[4:]:
        sd.update(np.load(f))
    sd = {k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in sd.items()}
    tensors = gguf_tensors(config.MODEL, sd)
    size = write(out, config.MODEL, tensors, tok, DESCRIPTION, quant=quant)
    print(f"{out}: {size} bytes")


if __name__ == "__main__":
    main()
