#!/usr/bin/env python3
"""The training corpus: the King James Bible as plain running text, one chapter per document.

Source: Debian's `bible-kjv-text` (public domain text; read through the `bible` program of package
`bible-kjv`, which prints one verse a line as `Ge1:1 In the beginning ...`). Cleaning: the verse
reference in front of each line is dropped, runs of spaces become one space, and the verses of a
chapter are joined with single spaces, so a chapter reads as one paragraph with no numbering. The
text has no other markup (its alphabet is letters, space and !'(),-.:;?).

Split: every 25th chapter (index % 25 == 12, counted over the whole Bible in canonical order) is
validation, the rest training; 48 of 1189 chapters, about 4 % of the text.

Usage: corpus.py OUT.jsonl    (one JSON object a line: book, chapter, split, text)
Needs the `bible` program (apt-get install -y bible-kjv bible-kjv-text); no Python packages.
"""
import json
import re
import subprocess
import sys

VAL_EVERY, VAL_PHASE = 25, 12
REF = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")


def chapters():
    raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    out, cur, key = [], [], None
    for line in raw.splitlines():
        m = REF.match(line)
        if not m:
            raise SystemExit(f"unexpected line from bible: {line[:80]!r}")
        book, ch, verse, text = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if (book, ch) != key:
            if cur:
                out.append((key, cur))
            key, cur = (book, ch), []
            if verse != 1:
                raise SystemExit(f"{book}{ch} starts at verse {verse}")
        cur.append(re.sub(r" {2,}", " ", text.strip()))
    out.append((key, cur))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    chs = chapters()
    n_val = n_chars = 0
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        for i, ((book, ch), verses) in enumerate(chs):
            split = "val" if i % VAL_EVERY == VAL_PHASE else "train"
            n_val += split == "val"
            text = " ".join(verses)
            n_chars += len(text)
            f.write(json.dumps(dict(book=book, chapter=ch, split=split, text=text)) + "\n")
    print(f"{sys.argv[1]}: {len(chs)} chapters ({n_val} validation), {n_chars} characters")


if __name__ == "__main__":
    main()
