"""Tiny DeepSeek V4 configurations and token sequences for halo's golden fixtures.

Single source of truth for every generated file under tests/golden. Only the standard library
is imported here, so both the numpy-only model writer and the torch reference can use it.

Dimensions are chosen to stay inside llama.cpp v0.5.0's deepseek4 limits (ORACLES.md §4):
hc 4, compress ratios 0/4/128, sqrtsoftplus gating, one KV head, key length = value length,
indexer head dim a multiple of 64 and >= the rope dim, n_head divisible by the output groups;
and inside transformers' (one shared expert).
"""

VOCAB = 256

# Sequence lengths straddle the CSA ratio (4), the HCA ratio and sliding window (128), the real
# model's index top-k (512) and run long enough (1100 tokens = 275 CSA rows) that the indexer's
# top-k selects from many more rows than it keeps.
SEQ_LENGTHS = [1, 7, 64, 127, 128, 129, 300, 520, 1100]
SEQ_SEED_BASE = 20260917

# Greedy continuations: (sequence name, new tokens). The 127-token prompt crosses the
# 128-token HCA window and the sliding window of tiny-a while decoding.
GREEDY = [("L7", 32), ("L127", 32)]


def seq_name(n):
    return f"L{n}"


def _common(**over):
    c = dict(
        vocab_size=VOCAB,
        hidden_size=128,
        num_hidden_layers=6,
        # two sliding-only layers, then CSA (4) and HCA (128) alternating, like V4 Flash
        compress_ratios=[0, 0, 4, 128, 4, 128],
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=128,
        qk_rope_head_dim=32,
        q_lora_rank=32,
        o_groups=2,
        o_lora_rank=64,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_shared_experts=1,
        moe_intermediate_size=32,
        num_hash_layers=3,
        scoring_func="sqrtsoftplus",
        norm_topk_prob=True,
        routed_scaling_factor=1.5,
        # V4 Flash uses 10; pre-activations here have std ~1, so 1.25 clips a good share of them
        swiglu_limit=1.25,
        hc_mult=4,
        hc_sinkhorn_iters=20,
        hc_eps=1.0e-6,
        rms_norm_eps=1.0e-6,
        index_n_heads=64,
        index_head_dim=64,
        index_topk=8,
        sliding_window=128,
        rope_theta=10000.0,
        compress_rope_theta=160000.0,
        max_position_embeddings=2048,
        rope_scaling=None,
    )
    c.update(over)
    return c


MODELS = {
    "tiny-a": dict(seed=1001, config=_common()),
    # YaRN on the compressed layers as V4 Flash has it (factor 16 over 65536 there); here the
    # original context is small so the interpolated band covers most rope pairs. llama.cpp v0.5.0
    # does not read yarn_beta_fast/slow from GGUF (it uses 32 and 1), so the betas are V4's own.
    "tiny-yarn": dict(
        seed=2002,
        config=_common(
            n_routed_experts=16,
            num_experts_per_tok=4,
            moe_intermediate_size=16,
            index_topk=16,
            sliding_window=64,
            rope_scaling=dict(
                type="yarn",
                factor=8.0,
                original_max_position_embeddings=256,
                beta_fast=32.0,
                beta_slow=1.0,
            ),
        ),
    ),
}

# Weight variants written for every model: name -> storage rule (see make_models.py).
VARIANTS = ["f32", "f16"]

# ---- quantized variants (tools/oracle/make_quant.py) ------------------------------------------
# K- and i-quants store rows of 256 values, so ds4's mix (IQ2_XXS / Q2_K experts) and Q4_K_M need
# a model with hidden size and expert width 256 (tiny-a's 128 and 32 would make llama-quantize
# fall back to other types for every expert). That makes every tensor that reads the residual
# stream twice tiny-a's size, and the fixture budget (tests/golden <= 40 MiB: ~5.5 MB were left
# when these were added) must hold the files plus their expected logits: with tiny-a's six
# layers the three mixes alone would take ~25 MB. So the quantized models have two layers, one
# compressed sparse attention layer (ratio 4: sliding window + compressor + 64-head indexer,
# top-k 8; hash-routed MoE) and one heavily compressed layer (ratio 128; learned routing, which
# llama.cpp v0.5.0 also needs: without a ratio-128 layer its graph divides by zero), two heads
# of 64. That holds every kind of tensor the mixes quantize differently; the sliding-only layer
# type adds none, and tiny-a / tiny-yarn cover depth in F32/F16. MXFP4 and the other 32-blocks
# of llama.cpp's converter mix need no 256-wide rows, so that mix sits on tiny-m, the same
# shape at hidden 128 (its F32 HC mixers and BF16 matrices would double at hidden 256).
_QUANT_COMMON = dict(
    num_hidden_layers=2,
    compress_ratios=[4, 128],
    num_hash_layers=1,
    num_attention_heads=2,
    head_dim=64,
    o_lora_rank=32,
    n_routed_experts=4,
    num_experts_per_tok=2,
)
QUANT_MODELS = {
    "tiny-q": dict(seed=3003, variants=["ds4", "q4km"],
                   config=_common(hidden_size=256, moe_intermediate_size=256, **_QUANT_COMMON)),
    "tiny-m": dict(seed=4004, variants=["mxfp4"],
                   config=_common(moe_intermediate_size=32, **_QUANT_COMMON)),
}

# Sequences whose expected logits are stored for the quantized variants (a subset, for the
# budget): a short one, and one that crosses the 128-token sliding window and HCA ratio and
# gives the indexer a real choice (75 compressed rows for its top-8).
QUANT_SEQS = ["L7", "L300"]

# Quantized mixes: name -> description (types per tensor class in make_quant.py).
QUANT_VARIANTS = {
    "ds4": "ds4's q2 mix: IQ2_XXS routed gate/up, Q2_K routed down (llama-quantize with an "
           "importance matrix from llama-imatrix), Q8_0 attention projections, shared expert "
           "and output, F16 embedding, router, compressor, indexer and HC mixers, F32 vectors",
    "mxfp4": "llama.cpp converter's mix (conversion/deepseek.py): MXFP4 routed experts, Q8_0 for "
             "the checkpoint's FP8 matrices (attention, shared expert, indexer q_b), BF16 for its "
             "BF16 ones (embedding, output, router, compressor, indexer proj), F32 HC mixers, "
             "compressor position bias and vectors",
    "q4km": "llama-quantize Q4_K_M from the F32 model (no importance matrix): llama.cpp's own "
            "choice of Q4_K / Q6_K, with its fallbacks where rows are not multiples of 256",
}
