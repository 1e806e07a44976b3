#!/usr/bin/env python3
"""Writes the tokenizer test corpus: tests/tokenizer/corpus.jsonl, one JSON string per line.

Sources, all deterministic:
  * English prose: King James Bible verses from Debian's bible-kjv (public domain; needs the
    `bible` program of packages bible-kjv + bible-kjv-text);
  * code: lines of halo's own C sources at a fixed commit (git show), indentation kept;
  * hand-written lines in many scripts, emoji, whitespace runs, digit strings, DeepSeek's
    special tokens, and seeded random mixtures of all of them.
Usage: make_corpus.py OUT.jsonl [--commit SHA]
"""
import json
import random
import re
import subprocess
import sys

KJV_SPECS = ["Gen1:1-3:24", "Ps1:1-30:12", "Pr1:1-10:32", "Jn1:1-5:47", "Rev21:1-22:21"]
CODE_FILES = ["src/gguf/open.c", "src/core/error.c", "include/halo/gguf.h"]
DEFAULT_COMMIT = "c545a45"

CJK = [
    "今天天气很好，我们去公园散步吧。",
    "机器学习模型需要大量的数据来训练。",
    "這是一個用繁體中文寫的句子，包含標點符號。",
    "北京、上海和深圳是中国最大的城市之一。",
    "请把第3章的内容翻译成英文，谢谢！",
    "東京は日本の首都です。",
    "きょうはいいてんきですね。",
    "カタカナのテキストとひらがなのテキストを混ぜる。",
    "私はプログラマーで、毎日コードを書いています。",
    "吾輩は猫である。名前はまだ無い。",
    "안녕하세요, 만나서 반갑습니다.",
    "한국어 문장에는 띄어쓰기가 있습니다.",
    "人工知能（AI）と大規模言語モデル（LLM）",
    "「引用符」と『二重引用符』の使い方",
    "价格：￥1,234.56元（含税）",
    "中文English混合123测试",
    "一二三四五六七八九十百千万亿",
    "龘靐齉爩 — rare characters",
]
OTHER_SCRIPTS = [
    "مرحبا بالعالم، هذه جملة باللغة العربية.",
    "اللغة العربية تكتب من اليمين إلى اليسار ١٢٣٤٥٦٧٨٩٠",
    "الذكاء الاصطناعي يغير العالم بسرعة كبيرة.",
    "שלום עולם, זה משפט בעברית.",
    "नमस्ते दुनिया, यह हिंदी में एक वाक्य है।",
    "संस्कृत भाषा की लिपि देवनागरी है।",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Привет, мир! Это предложение на русском языке.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Γειά σου Κόσμε! Αυτή είναι μια ελληνική πρόταση.",
    "Ἐν ἀρχῇ ἦν ὁ λόγος",
    "Zażółć gęślą jaźń — polskie znaki diakrytyczne.",
    "Ça coûte 12,50 € à l'hôtel près de la gare.",
    "Der Fußgänger überquert die Straße.",
    "Tiếng Việt có nhiều dấu thanh điệu.",
    "Ẓ̌ combining marks: e\u0301 a\u0308 n\u0303 o\u0302\u0323",
    "ქართული ენა — Georgian",
    "Հայերեն — Armenian",
    "ᚠᚢᚦᚨᚱᚲ runes and 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 math letters 𝟘𝟙𝟚",
    "zero\u200bwidth\u200cjoiner\u200dmarks\u2060here",
    "non\u00a0breaking\u00a0space and\u3000ideographic space",
    "full-width：ＡＢＣ１２３！？",
]
EMOJI = [
    "😀", "👍🏽", "🇯🇵🇫🇷🇺🇸", "👨‍👩‍👧‍👦", "🏳️‍🌈", "1️⃣2️⃣#️⃣", "❤️🔥✨",
    "I love pizza 🍕 and coffee ☕!", "🤖 + 🧠 = 🚀", "emoji at end 🎉🎉🎉",
    "🧑🏿‍💻 writes code", "⚠️ warning ⛔ stop ✅ ok", "🐍🦀🐹 languages",
]
SPECIAL = [
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>", "<｜tool▁outputs▁end｜>", "<think>", "</think>",
]
WORDS = ("the model token cache expert layer attention window prefix memory pool GPU "
         "host device arena plan quant block scale offset byte string").split()


def kjv():
    spec = "\n".join(KJV_SPECS) + "\n"
    out = subprocess.run(["bible", "-l", "4000"], input=spec, capture_output=True, text=True,
                         check=True).stdout
    seen, verses = set(), []
    for line in out.splitlines():
        m = re.match(r"^(?:bible\(KJV\) \[[^]]*\]> )?\s+(\d+) (.+)$", line)
        if m and line not in seen:
            seen.add(line)
            verses.append(m.group(2).rstrip())
    return verses


def code(commit):
    lines = []
    for f in CODE_FILES:
        text = subprocess.run(["git", "show", f"{commit}:{f}"], capture_output=True, text=True,
                              check=True).stdout
        lines += [ln for ln in text.splitlines() if ln.strip()]
    return lines


def generated(rng):
    out = []
    # whitespace runs
    for n in list(range(1, 41)) + [64, 100, 129, 257]:
        out.append(" " * n)
        out.append("a" + " " * n + "b")
        out.append("\t" * (n % 9 + 1) + "x" + " " * n)
    for s in ["\n", "\n\n", "\r\n", "\r", "a\nb", "a\r\nb", "line one\nline two\n\nline four",
              "  \n  \n", "\t\n\t", " \u3000 ", "trailing   ", "   leading", "mid    spaces    here",
              "\n   indented after newline", "x\n\n\n\n\n\ny", "tab\tseparated\tvalues\t1\t2\t3"]:
        out.append(s)
    # digit strings
    for n in range(1, 41):
        out.append("".join(rng.choice("0123456789") for _ in range(n)))
    for s in ["3.14159265358979", "-42", "+1 (555) 010-9999", "1,234,567.89", "1e-6", "0x7fff_ffff",
              "2026-09-28T12:34:56Z", "v0.5.0", "192.168.0.1", "100%", "12345678901234567890",
              "٣٤٥", "१२३४", "①②③", "Ⅻ", "½ ¾ ⅓", "$5.00", "€20", "¥300", "1st 2nd 3rd 4th"]:
        out.append(s)
    # special tokens in and around text
    for sp in SPECIAL:
        out.append(sp)
        out.append(f"Hello{sp}world")
        out.append(f" {sp} spaced ")
    out.append("".join(SPECIAL))
    out.append("<｜User｜>What is 2+2?<｜Assistant｜><think>\nSimple.\n</think>\n\n4<｜end▁of▁sentence｜>")
    out.append("<｜User incomplete special <｜ ｜> <|User|> <｜user｜>")
    # every printable ASCII char alone, and control characters
    for c in range(32, 127):
        out.append(chr(c))
    out.append("".join(chr(c) for c in range(1, 32) if c not in (10, 13)))
    out.append("\x7f\x80\x9f")
    out.append("")
    # emoji, scripts
    out += EMOJI + CJK + OTHER_SCRIPTS
    # seeded mixtures
    pools = [CJK, OTHER_SCRIPTS, EMOJI, SPECIAL, WORDS]
    for _ in range(400):
        k = rng.randint(2, 8)
        parts = []
        for _ in range(k):
            pool = rng.choice(pools)
            s = rng.choice(pool)
            if len(s) > 12 and rng.random() < 0.5:
                i = rng.randrange(len(s) - 6)
                s = s[i:i + rng.randint(3, 12)]
            parts.append(s)
            parts.append(rng.choice(["", " ", "  ", "\n", "\t", ", ", "123", " 4567 "]))
        out.append("".join(parts))
    return out


def main():
    path = sys.argv[1]
    commit = DEFAULT_COMMIT
    if "--commit" in sys.argv:
        commit = sys.argv[sys.argv.index("--commit") + 1]
    rng = random.Random(4242)
    verses = kjv()
    src = code(commit)
    items = []
    items += verses
    # paragraphs: verses joined by newlines, code blocks as whole
    for i in range(0, min(len(verses), 400), 8):
        items.append("\n".join(verses[i:i + 8]))
    items += src
    for i in range(0, len(src), 25):
        items.append("\n".join(src[i:i + 25]) + "\n")
    items += generated(rng)
    with open(path, "w", encoding="utf-8") as f:
        for s in items:
            f.write(json.dumps(s, ensure_ascii=True) + "\n")
    print(f"{path}: {len(items)} lines ({len(verses)} verses, {len(src)} code lines)")


if __name__ == "__main__":
    main()
