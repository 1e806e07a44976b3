#!/usr/bin/env python3
"""Reference ids for the text of added tokens tokenized as plain text (issue 19).

  added_tokens_as_text.py LLAMA_TOKENIZE VOCAB.gguf OUT.jsonl

For every control and user-defined token of the vocabulary (as llama.cpp v0.5.0 reads it:
`llama_tokenize VOCAB --added`), four texts holding the token's text — alone, inside words,
twice, between whitespace — tokenized by llama.cpp with parse_special = false and no BOS
(`llama_tokenize VOCAB RECORDS OUT plain`). Writes one JSON object per line:
{"id": token id, "text": the text, "ids": llama.cpp's ids}. halo's plain encoding
(halo_tokenizer_encode without HALO_TOKENIZE_SPECIAL) must give the same ids
(tests/text/test_tokenizer.c). Both vocabularies used have no user-defined tokens, which
llama.cpp (and HF) would still match in plain mode and halo would not.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile


def forms(t):
    return [t, "x" + t + " y", "a" + t + "b " + t, " \n" + t + "\n\n"]


def main():
    tool, vocab, out = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as d:
        added = os.path.join(d, "added.txt")
        subprocess.run([tool, vocab, "--added", added], check=True)
        rows = []
        with open(added, encoding="utf-8") as f:
            for line in f:
                tid, attr, text = line.rstrip("\n").split(" ", 2)
                assert attr == "c", "user-defined tokens: plain mode differs between engines"
                rows += [(int(tid), s) for s in forms(text)]
        rec = os.path.join(d, "rec.bin")
        with open(rec, "wb") as f:
            for _, s in rows:
                b = s.encode("utf-8")
                f.write(struct.pack("<I", len(b)) + b)
        ids = os.path.join(d, "ids.txt")
        subprocess.run([tool, vocab, rec, ids, "plain"], check=True)
        with open(ids) as f:
            got = [[int(v) for v in line.split()] for line in f]
    assert len(got) == len(rows)
    with open(out, "w", encoding="utf-8") as f:
        for (tid, s), i in zip(rows, got):
            f.write(json.dumps({"id": tid, "text": s, "ids": i}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
