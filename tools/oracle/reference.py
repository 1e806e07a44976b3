#!/usr/bin/env python3
"""Expected outputs from transformers' DeepseekV4ForCausalLM for the golden GGUF models.

For each GGUF under --models, reads every tensor back with gguf-py, dequantizes it to float32,
maps it onto transformers' parameter names and runs the model on CPU in float32 with eager
attention and one thread (so reruns are bit for bit), without a KV cache:
  * logits at every position of each token sequence (tokens.i32, lengths in configs.py);
  * per position, the smallest MoE routing margin (k-th minus (k+1)-th of score + bias, over
    the non-hash layers) and the smallest indexer margin (k-th minus (k+1)-th masked index
    score, over the CSA layers; +inf where every causally visible row is selected);
  * greedy continuations (configs.GREEDY), each step a full forward of the growing sequence;
  * the same logits in float64 for scale: max |fp32 - fp64| per sequence.

Writes OUT/<model>-<variant>.{logits.f32,margins.f32,greedy.f32,json}.
With --quant: the quantized variants (configs.QUANT_MODELS), sequences configs.QUANT_SEQS only,
no greedy runs (no greedy.f32).
Usage: reference.py --models DIR --tokens FILE --out DIR [--only NAME-VARIANT ...] [--quant]
Needs torch, transformers (>= 5.17 with deepseek_v4), numpy and gguf-py on PYTHONPATH.
"""
import argparse
import copy
import json
import os
import sys
import time
import traceback

import numpy as np
import torch

import gguf
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402


def read_gguf(path):
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        if t.tensor_type == gguf.GGMLQuantizationType.I32:
            arr = np.array(t.data, dtype=np.int32).reshape(shape)
        else:
            arr = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        out[t.name] = arr
    return out


LAYER_TYPE = {0: "sliding_attention", 4: "compressed_sparse_attention",
              128: "heavily_compressed_attention"}


def hf_config(cfg):
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

    L = cfg["num_hidden_layers"]
    kw = dict(
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["hidden_size"],
        moe_intermediate_size=cfg["moe_intermediate_size"],
        num_hidden_layers=L,
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=1,
        head_dim=cfg["head_dim"],
        q_lora_rank=cfg["q_lora_rank"],
        num_experts_per_tok=cfg["num_experts_per_tok"],
        n_routed_experts=cfg["n_routed_experts"],
        n_shared_experts=cfg["n_shared_experts"],
        scoring_func=cfg["scoring_func"],
        norm_topk_prob=cfg["norm_topk_prob"],
        routed_scaling_factor=cfg["routed_scaling_factor"],
        max_position_embeddings=cfg["max_position_embeddings"],
        rope_theta=cfg["rope_theta"],
        compress_rope_theta=cfg["compress_rope_theta"],
        layer_types=[LAYER_TYPE[r] for r in cfg["compress_ratios"]],
        mlp_layer_types=["hash_moe"] * cfg["num_hash_layers"] + ["moe"] * (L - cfg["num_hash_layers"]),
        partial_rotary_factor=cfg["qk_rope_head_dim"] / cfg["head_dim"],
        hc_mult=cfg["hc_mult"],
        hc_sinkhorn_iters=cfg["hc_sinkhorn_iters"],
        hc_eps=cfg["hc_eps"],
        swiglu_limit=cfg["swiglu_limit"],
        sliding_window=cfg["sliding_window"],
        o_groups=cfg["o_groups"],
        o_lora_rank=cfg["o_lora_rank"],
        index_n_heads=cfg["index_n_heads"],
        index_head_dim=cfg["index_head_dim"],
        index_topk=cfg["index_topk"],
        rms_norm_eps=cfg["rms_norm_eps"],
        num_nextn_predict_layers=0,
        tie_word_embeddings=False,
    )
    rs = cfg["rope_scaling"]
    if rs:
        kw["rope_parameters"] = dict(
            rope_type="yarn",
            factor=rs["factor"],
            original_max_position_embeddings=rs["original_max_position_embeddings"],
            beta_fast=rs["beta_fast"],
            beta_slow=rs["beta_slow"],
        )
    c = DeepseekV4Config(**kw)
    # the plain reference paths: eager attention, and the per-expert loop rather than
    # torch's grouped_mm (which also has no float64 kernel on CPU)
    c._attn_implementation = "eager"
    c._experts_implementation = "eager"
    return c


def hf_state_dict(cfg, T):
    sd = {
        "model.embed_tokens.weight": T["token_embd.weight"],
        "lm_head.weight": T["output.weight"],
        "model.norm.weight": T["output_norm.weight"],
        "model.hc_head.hc_fn": T["output_hc_fn.weight"],
        "model.hc_head.hc_base": T["output_hc_base.weight"],
        "model.hc_head.hc_scale": T["output_hc_scale.weight"],
    }
    for il, r in enumerate(cfg["compress_ratios"]):
        b, p = f"blk.{il}.", f"model.layers.{il}."
        a = p + "self_attn."
        m = p + "mlp."
        sd.update({
            p + "input_layernorm.weight": T[b + "attn_norm.weight"],
            p + "post_attention_layernorm.weight": T[b + "ffn_norm.weight"],
            a + "sinks": T[b + "attn_sinks.weight"],
            a + "q_a_proj.weight": T[b + "attn_q_a.weight"],
            a + "q_a_norm.weight": T[b + "attn_q_a_norm.weight"],
            a + "q_b_proj.weight": T[b + "attn_q_b.weight"],
            a + "kv_proj.weight": T[b + "attn_kv.weight"],
            a + "kv_norm.weight": T[b + "attn_kv_a_norm.weight"],
            a + "o_a_proj.weight": T[b + "attn_output_a.weight"],
            a + "o_b_proj.weight": T[b + "attn_output_b.weight"],
            m + "gate.weight": T[b + "ffn_gate_inp.weight"],
            m + "experts.gate_up_proj": np.concatenate(
                [T[b + "ffn_gate_exps.weight"], T[b + "ffn_up_exps.weight"]], axis=1),
            m + "experts.down_proj": T[b + "ffn_down_exps.weight"],
            m + "shared_experts.gate_proj.weight": T[b + "ffn_gate_shexp.weight"],
            m + "shared_experts.up_proj.weight": T[b + "ffn_up_shexp.weight"],
            m + "shared_experts.down_proj.weight": T[b + "ffn_down_shexp.weight"],
        })
        for hc in ("attn", "ffn"):
            sd[p + f"{hc}_hc.fn"] = T[b + f"hc_{hc}_fn.weight"]
            sd[p + f"{hc}_hc.base"] = T[b + f"hc_{hc}_base.weight"]
            sd[p + f"{hc}_hc.scale"] = T[b + f"hc_{hc}_scale.weight"]
        if il < cfg["num_hash_layers"]:
            sd[m + "gate.tid2eid"] = T[b + "ffn_gate_tid2eid.weight"].astype(np.int64)
        else:
            sd[m + "gate.e_score_correction_bias"] = T[b + "exp_probs_b.bias"]
        if r:
            c = a + "compressor."
            sd.update({
                c + "kv_proj.weight": T[b + "attn_compressor_kv.weight"],
                c + "gate_proj.weight": T[b + "attn_compressor_gate.weight"],
                c + "position_bias": T[b + "attn_compressor_ape.weight"],
                c + "kv_norm.weight": T[b + "attn_compressor_norm.weight"],
            })
            if r == 4:
                x = c + "indexer."
                sd.update({
                    x + "kv_proj.weight": T[b + "indexer_compressor_kv.weight"],
                    x + "gate_proj.weight": T[b + "indexer_compressor_gate.weight"],
                    x + "position_bias": T[b + "indexer_compressor_ape.weight"],
                    x + "kv_norm.weight": T[b + "indexer_compressor_norm.weight"],
                    x + "q_b_proj.weight": T[b + "indexer.attn_q_b.weight"],
                    x + "scorer.weights_proj.weight": T[b + "indexer.proj.weight"],
                })
    return {k: torch.from_numpy(np.array(v)) for k, v in sd.items()}


def build_model(cfg, T):
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4ForCausalLM

    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(hf_config(cfg)).to(torch.float32).eval()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    assert model.config._experts_implementation == "eager", model.config._experts_implementation
    sd = hf_state_dict(cfg, T)
    res = model.load_state_dict(sd, strict=True)
    assert not res.missing_keys and not res.unexpected_keys, res
    for k, v in model.state_dict().items():  # bit-exact load, no silent tying or casting
        if k in sd:
            assert torch.equal(v.to(sd[k].dtype), sd[k]), k
    return model


class Margins:
    """Forward hooks recording top-k decision margins of the float32 model."""

    def __init__(self, model, cfg):
        from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdl

        self.moe, self.idx = [], []
        self.k_moe = cfg["num_experts_per_tok"]
        self.k_idx = cfg["index_topk"]
        self.ratio = 4
        for mod in model.modules():
            if isinstance(mod, mdl.DeepseekV4TopKRouter):
                mod.register_forward_hook(self._router)
            elif isinstance(mod, mdl.DeepseekV4IndexerScorer):
                mod.register_forward_hook(self._scorer)

    def reset(self):
        self.moe, self.idx = [], []

    def _router(self, mod, inp, out):
        logits = out[0]
        s = (mod.score_fn(logits) + mod.e_score_correction_bias).sort(dim=-1, descending=True).values
        self.moe.append((s[:, self.k_moe - 1] - s[:, self.k_moe]).double())

    def _scorer(self, mod, inp, out):
        scores = out[0]  # [S, T]
        S, T = scores.shape
        pos = torch.arange(S)
        visible = (pos + 1) // self.ratio  # rows a query may select (transformers' causal rule)
        masked = scores.masked_fill(torch.arange(T)[None, :] >= visible[:, None], float("-inf"))
        k = min(self.k_idx, T)
        m = torch.full((S,), float("inf"), dtype=torch.float64)
        if T > k:
            s = masked.sort(dim=-1, descending=True).values
            decided = visible > k
            m[decided] = (s[decided, k - 1] - s[decided, k]).double()
        self.idx.append(m)

    def per_position(self, S):
        moe = torch.stack(self.moe).min(0).values if self.moe else torch.full((S,), float("inf"))
        idx = torch.stack(self.idx).min(0).values if self.idx else torch.full((S,), float("inf"))
        return np.stack([moe.numpy(), idx.numpy()], axis=1).astype(np.float32)


def forward(model, ids):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0]


def run_variant(models_dir, tokens, name, variant, out_dir, quant=False):
    cfg = (configs.QUANT_MODELS if quant else configs.MODELS)[name]["config"]
    path = os.path.join(models_dir, f"{name}-{variant}.gguf")
    t0 = time.time()
    T = read_gguf(path)
    model = build_model(cfg, T)
    model64 = copy.deepcopy(model).to(torch.float64)
    hooks = Margins(model, cfg)

    seqs, off = {}, 0
    for n in configs.SEQ_LENGTHS:
        seqs[configs.seq_name(n)] = tokens[off:off + n].tolist()
        off += n
    greedy_runs = configs.GREEDY
    if quant:
        seqs = {k: seqs[k] for k in configs.QUANT_SEQS}
        greedy_runs = []

    logits, margins, seq_info = [], [], []
    for sname, ids in seqs.items():
        hooks.reset()
        lg = forward(model, ids)
        margins.append(hooks.per_position(len(ids)))
        lg64 = forward(model64, ids)
        d = (lg.double() - lg64).abs().max().item()
        logits.append(lg.numpy().astype(np.float32))
        seq_info.append(dict(name=sname, fp64_max_abs=d,
                             ref_range=float(lg.max() - lg.min())))
        print(f"{name}-{variant} {sname}: fp32 vs fp64 max|d| {d:.3g}", flush=True)

    greedy, greedy_logits = [], []
    for sname, steps in greedy_runs:
        ids = list(seqs[sname])
        gen, gm = [], []
        for _ in range(steps):
            row = forward(model, ids)[-1]
            top2 = torch.topk(row, 2).values
            tok = int(torch.argmax(row))
            gen.append(tok)
            gm.append(float(top2[0] - top2[1]))
            greedy_logits.append(row.numpy().astype(np.float32))
            ids.append(tok)
        greedy.append(dict(prompt=sname, steps=steps, tokens=gen, top1_margins=gm))

    base = os.path.join(out_dir, f"{name}-{variant}")
    np.concatenate(logits).astype("<f4").tofile(base + ".logits.f32")
    np.concatenate(margins).astype("<f4").tofile(base + ".margins.f32")
    if greedy_logits:
        np.stack(greedy_logits).astype("<f4").tofile(base + ".greedy.f32")
    import transformers
    meta = dict(
        model=name, variant=variant, sequences=seq_info, greedy=greedy,
        hf_config=json.loads(model.config.to_json_string()),
        versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                      numpy=np.__version__, python=sys.version.split()[0]),
        threads=torch.get_num_threads(), seconds=time.time() - t0,
    )
    with open(base + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}-{variant}: done in {time.time() - t0:.1f}s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--quant", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    tokens = np.fromfile(args.tokens, dtype="<i4")
    rc = 0
    todo = ([(n, v) for n, m in configs.QUANT_MODELS.items() for v in m["variants"]] if args.quant
            else [(n, v) for n in configs.MODELS for v in configs.VARIANTS])
    for name, variant in todo:
        if args.only and f"{name}-{variant}" not in args.only:
            continue
        try:
            run_variant(args.models, tokens, name, variant, args.out, args.quant)
        except Exception:
            traceback.print_exc()
            rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
