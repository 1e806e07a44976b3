"""The embedded default model's configuration, training settings and test prompts.

Standard library only, so numpy-only (export) and torch (training, reference) code share it.
The model dict uses the keys of tools/oracle/configs.py, so tools/oracle's GGUF writer
(make_models.write_gguf) and transformers mapping (reference.hf_config / hf_state_dict) take it
unchanged. Limits it respects (shared/ORACLES.md §4, llama.cpp v0.5.0 deepseek4 and
transformers 5.17): hc 4, compress ratios 0/4/128 only, sqrtsoftplus gating, one KV head, key
length = value length, indexer head dim a multiple of 64 and >= the rope dim, n_head divisible
by o_groups, one shared expert.
"""

NAME = "kjv-tiny"
# Storage of the 2-D and 3-D float tensors in the shipped GGUF (1-D stay F32, hash tables I32):
# "q8_0" (10.6 MB) keeps the repository's working tree small; "f16" (19.7 MB) is lossless
# against the F16-rounded training weights.
QUANT = "q8_0"
GGUF_NAME = f"{NAME}.gguf"

# Vocabulary: byte-level BPE trained on the KJV training split (tokenizer.py).
VOCAB = 4096
# DeepSeek V4's special tokens (BOS/EOS/pad as in DeepSeek V3's tokenizer; the chat markers,
# think tags and DSML/tool markers that the V4 chat template
# llama.cpp/models/templates/deepseek-ai-DeepSeek-V4.jinja writes), reserved first, ids 0..9.
SPECIAL_TOKENS = [
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜▁pad▁｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
    "｜DSML｜",
    "<tool_result>",
    "</tool_result>",
]
BOS_ID, EOS_ID, PAD_ID = 0, 1, 2

MODEL = dict(
    vocab_size=VOCAB,
    hidden_size=256,
    num_hidden_layers=6,
    # like V4 Flash: sliding-only first layers, then CSA (ratio 4, with the lightning indexer)
    # and HCA (ratio 128) alternating
    compress_ratios=[0, 0, 4, 128, 4, 128],
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=128,
    qk_rope_head_dim=32,
    q_lora_rank=64,
    o_groups=2,
    o_lora_rank=64,
    n_routed_experts=8,
    num_experts_per_tok=2,
    n_shared_experts=1,
    moe_intermediate_size=128,
    num_hash_layers=2,
    scoring_func="sqrtsoftplus",
    norm_topk_prob=True,
    routed_scaling_factor=1.5,
    swiglu_limit=10.0,
    hc_mult=4,
    hc_sinkhorn_iters=20,
    hc_eps=1.0e-6,
    rms_norm_eps=1.0e-6,
    index_n_heads=64,
    index_head_dim=64,
    index_topk=16,
    sliding_window=128,
    rope_theta=10000.0,
    compress_rope_theta=160000.0,
    max_position_embeddings=4096,
    rope_scaling=None,
)

TRAIN = dict(
    seed=8,
    seq_len=1024,          # 8 HCA windows, 256 CSA rows of which the indexer keeps 16
    batch=24,
    lr=1.5e-3,
    min_lr_frac=0.1,
    warmup_steps=100,
    weight_decay=0.1,
    betas=(0.9, 0.95),
    grad_clip=1.0,
    attention_dropout=0.1,
    dropout=0.1,              # residual dropout (train.py's hooks)
    bias_update_rate=1.0e-3,  # aux-loss-free expert balancing (DeepSeek V3 §2.1.2)
    train_seconds=420,
    eval_every_seconds=30,
)

# Greedy test prompts (text after BOS) and the number of new tokens.
PROMPTS = [
    ("beginning", "In the beginning"),
    ("moses", "And the LORD said unto Moses"),
    ("blessed", "Blessed are the"),
]
GREEDY_STEPS = 40
# One long prompt so the test crosses the sliding window, fills HCA rows and makes the
# indexer choose 16 of ~160 CSA rows: BOS + the first LONG_TOKENS - 1 tokens of the
# validation chapter LONG_CHAPTER.
LONG_CHAPTER = ("Luke", 15)
LONG_TOKENS = 640
