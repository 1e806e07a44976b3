#!/usr/bin/env python3
"""Writes the tiny DeepSeek V4 GGUF models and the shared token sequences of tests/golden.

Needs numpy and llama.cpp's gguf-py (PYTHONPATH=<llama.cpp>/gguf-py); no torch. Weights come
from numpy's PCG64 generator seeded per model and are drawn in a fixed order, so the files are
reproducible bit for bit. Tensor names, shapes and metadata keys are those llama.cpp v0.5.0's
deepseek4 loader and ds4's files use (ORACLES.md §4); arrays are in transformers' memory order
(numpy shape = ggml ne reversed), experts' gate_up split into ffn_gate_exps / ffn_up_exps.

Usage: make_models.py OUT_DIR   (writes OUT_DIR/models/*.gguf and OUT_DIR/tokens.i32)
"""
import os
import sys

import numpy as np

import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402


def ratio_kind(r):
    return {0: "swa", 4: "csa", 128: "hca"}[r]


def make_weights(cfg, seed):
    """Returns [(gguf_name, float32 or int32 array)] in file order."""
    rng = np.random.default_rng(seed)
    H = cfg["hidden_size"]
    V = cfg["vocab_size"]
    nh, hd = cfg["num_attention_heads"], cfg["head_dim"]
    ql = cfg["q_lora_rank"]
    g, ol = cfg["o_groups"], cfg["o_lora_rank"]
    hc = cfg["hc_mult"]
    mix = (2 + hc) * hc
    E, k, I = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"]
    nih, ihd = cfg["index_n_heads"], cfg["index_head_dim"]

    def normal(shape, std):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def linear(out_f, in_f, gain=1.0):
        return normal((out_f, in_f), gain / np.sqrt(in_f))

    def norm_w(n):
        return (np.float32(1.0) + normal((n,), 0.1)).astype(np.float32)

    def hc_params(prefix, n_out):
        return [
            (prefix + "_fn.weight", linear(n_out, hc * H)),
            (prefix + "_base.weight", normal((n_out,), 0.5)),
            (prefix + "_scale.weight", rng.uniform(0.5, 1.5, size=(3 if n_out == mix else 1,))
             .astype(np.float32)),
        ]

    t = [("token_embd.weight", normal((V, H), 1.0))]
    for il, r in enumerate(cfg["compress_ratios"]):
        b = f"blk.{il}."
        t += [
            (b + "attn_norm.weight", norm_w(H)),
            (b + "attn_sinks.weight", normal((nh,), 1.0)),
            (b + "attn_q_a.weight", linear(ql, H)),
            (b + "attn_q_a_norm.weight", norm_w(ql)),
            (b + "attn_q_b.weight", linear(nh * hd, ql)),
            (b + "attn_kv.weight", linear(hd, H)),
            (b + "attn_kv_a_norm.weight", norm_w(hd)),
            (b + "attn_output_a.weight", linear(g * ol, nh * hd // g)),
            (b + "attn_output_b.weight", linear(H, g * ol)),
        ]
        t += hc_params(b + "hc_attn", mix)
        t += hc_params(b + "hc_ffn", mix)
        if r:
            coff = 2 if r == 4 else 1
            t += [
                (b + "attn_compressor_kv.weight", linear(coff * hd, H)),
                (b + "attn_compressor_gate.weight", linear(coff * hd, H)),
                (b + "attn_compressor_ape.weight", normal((r, coff * hd), 0.5)),
                (b + "attn_compressor_norm.weight", norm_w(hd)),
            ]
            if r == 4:
                t += [
                    (b + "indexer.proj.weight", linear(nih, H)),
                    (b + "indexer.attn_q_b.weight", linear(nih * ihd, ql)),
                    (b + "indexer_compressor_kv.weight", linear(2 * ihd, H)),
                    (b + "indexer_compressor_gate.weight", linear(2 * ihd, H)),
                    (b + "indexer_compressor_ape.weight", normal((r, 2 * ihd), 0.5)),
                    (b + "indexer_compressor_norm.weight", norm_w(ihd)),
                ]
        t.append((b + "ffn_gate_inp.weight", linear(E, H)))
        if il < cfg["num_hash_layers"]:
            # distinct experts per token, as real tables have (ORACLES.md §4)
            tid = np.stack([rng.permutation(E)[:k] for _ in range(V)]).astype(np.int32)
            t.append((b + "ffn_gate_tid2eid.weight", tid))
        else:
            t.append((b + "exp_probs_b.bias", normal((E,), 0.1)))
        t += [
            (b + "ffn_norm.weight", norm_w(H)),
            (b + "ffn_gate_exps.weight", normal((E, I, H), 1.0 / np.sqrt(H))),
            (b + "ffn_up_exps.weight", normal((E, I, H), 1.0 / np.sqrt(H))),
            (b + "ffn_down_exps.weight", normal((E, H, I), 1.0 / np.sqrt(I))),
            (b + "ffn_gate_shexp.weight", linear(I, H)),
            (b + "ffn_up_shexp.weight", linear(I, H)),
            (b + "ffn_down_shexp.weight", linear(H, I)),
        ]
    t += hc_params("output_hc", hc)
    t += [
        ("output_norm.weight", norm_w(H)),
        ("output.weight", linear(V, H, gain=2.0)),
    ]
    return t


def storage_type(variant, name, arr):
    """F32 variant: everything F32. F16 variant: every float tensor of 2+ dims F16 (ds4 keeps its
    small matrices -- HC mixers, compressor position bias, indexer -- in F16 too); 1-D F32."""
    if arr.dtype == np.int32:
        return "I32"
    if variant == "f16" and arr.ndim >= 2:
        return "F16"
    return "F32"


def write_gguf(path, model_name, cfg, tensors, variant, file_type=None, encoded=None, extra_kv=None):
    """Writes one model file. The defaults give the F32/F16 variants; make_quant.py passes
    file_type, encoded ({name: (uint8 array, GGMLQuantizationType)} for tensors already stored
    in a quantized type) and extra_kv (a callback adding metadata, e.g. a vocabulary)."""
    arch = "deepseek4"
    w = gguf.GGUFWriter(path, arch)
    L = cfg["num_hidden_layers"]
    w.add_name(f"halo {model_name} ({variant})")
    if file_type is None:
        file_type = gguf.LlamaFileType.ALL_F32 if variant == "f32" else gguf.LlamaFileType.MOSTLY_F16
    w.add_file_type(file_type)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_embedding_length_out(cfg["hidden_size"] * cfg["hc_mult"])
    w.add_block_count(L)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(1)
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_q_lora_rank(cfg["q_lora_rank"])
    w.add_sliding_window(cfg["sliding_window"])
    w.add_attention_output_group_count(cfg["o_groups"])
    w.add_attention_output_lora_rank(cfg["o_lora_rank"])
    w.add_attention_compress_ratios(list(cfg["compress_ratios"]))
    w.add_attention_compress_rope_freq_base(cfg["compress_rope_theta"])
    w.add_indexer_head_count(cfg["index_n_heads"])
    w.add_indexer_key_length(cfg["index_head_dim"])
    w.add_indexer_top_k(cfg["index_topk"])
    w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
    w.add_rope_freq_base(cfg["rope_theta"])
    rs = cfg["rope_scaling"]
    if rs:
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rs["factor"])
        w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
        w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"])
        w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
    w.add_expert_count(cfg["n_routed_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_shared_count(cfg["n_shared_experts"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SQRTSOFTPLUS)
    w.add_expert_weights_scale(cfg["routed_scaling_factor"])
    w.add_expert_weights_norm(cfg["norm_topk_prob"])
    w.add_swiglu_clamp_exp([float(cfg["swiglu_limit"])] * L)
    w.add_swiglu_clamp_shexp([float(cfg["swiglu_limit"])] * L)
    w.add_hash_layer_count(cfg["num_hash_layers"])
    w.add_hyper_connection_count(cfg["hc_mult"])
    w.add_hyper_connection_sinkhorn_iterations(cfg["hc_sinkhorn_iters"])
    w.add_hyper_connection_epsilon(cfg["hc_eps"])
    if extra_kv:
        extra_kv(w)
    else:
        w.add_tokenizer_model("no_vocab")

    for name, arr in tensors:
        if encoded and name in encoded:
            data, qtype = encoded[name]
            w.add_tensor(name, data, raw_dtype=qtype)
            continue
        ty = storage_type(variant, name, arr)
        if ty == "F16":
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_tokens():
    seqs = []
    for n in configs.SEQ_LENGTHS:
        rng = np.random.default_rng(configs.SEQ_SEED_BASE + n)
        seqs.append(rng.integers(0, configs.VOCAB, size=n, dtype=np.int64).astype(np.int32))
    return seqs


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    os.makedirs(os.path.join(out, "models"), exist_ok=True)
    for name, m in configs.MODELS.items():
        tensors = make_weights(m["config"], m["seed"])
        for variant in configs.VARIANTS:
            path = os.path.join(out, "models", f"{name}-{variant}.gguf")
            write_gguf(path, name, m["config"], tensors, variant)
            print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    toks = np.concatenate(make_tokens())
    toks.astype("<i4").tofile(os.path.join(out, "tokens.i32"))
    print(f"wrote {out}/tokens.i32 ({toks.size} tokens)")


if __name__ == "__main__":
    main()
