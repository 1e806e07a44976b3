#!/usr/bin/env python3
"""Writes tests/golden/kjv/ from train.py's results.json (runs anywhere, standard library only):
  expected.txt   per prompt: its ids (BOS + HF tokenizer ids), transformers' 40 greedy ids and
                 the top-1 minus top-2 logit margin of each step (read by
                 tests/model/test_embedded_model.c);
  reference.json results.json as train.py wrote it (config, training history, versions, every
                 margin recorded, decoded texts);
  manifest.json  the model file and its sha256, versions, and the commands that made all this.

  make_golden.py RESULTS.json MODEL.gguf OUT_DIR
"""
import hashlib
import json
import os
import shutil
import sys

COMMANDS = [
    "# here (Debian 12): corpus and gguf-py",
    "apt-get install -y bible-kjv bible-kjv-text python3-numpy",
    "python3 tools/train_tiny/corpus.py .train_tiny/kjv_chapters.jsonl",
    "cp -r <llama.cpp v0.5.0>/gguf-py .train_tiny/gguf-py   # .train_tiny is in .git/info/exclude",
    "# GPU machine (device tool, carry [\".train_tiny\"]): vocabulary, training, export, reference",
    "PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.train_tiny/gguf-py python3 tools/train_tiny/train.py "
    "--corpus .train_tiny/kjv_chapters.jsonl --out $OUT --work /tmp/tt --deadline 430",
    "# (the committed run had config.QUANT = 'f16': it wrote the F16 GGUF (19,670,720 bytes, "
    "sha256 03886aa0...), ckpt_experts.npz and ckpt_rest.npz; the Q8_0 file was then exported "
    "from those checkpoints and its reference recomputed:)",
    "cp $OUT/tokenizer.json tools/train_tiny/tokenizer.json",
    "PYTHONPATH=/tmp/llama.cpp/gguf-py python3 tools/train_tiny/export.py "
    "tools/train_tiny/tokenizer.json models/kjv-tiny.gguf q8_0 $OUT/ckpt_experts.npz "
    "$OUT/ckpt_rest.npz",
    "grep '\"split\": \"val\"' .train_tiny/kjv_chapters.jsonl > .train_tiny/kjv_val.jsonl; "
    "cp $OUT/results.json .train_tiny/results_f16.json",
    "# GPU machine (carry [\".train_tiny\"]), about 70 s:",
    "PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.train_tiny/gguf-py python3 "
    "tools/train_tiny/reference_run.py --gguf models/kjv-tiny.gguf --tokenizer "
    "tools/train_tiny/tokenizer.json --corpus .train_tiny/kjv_val.jsonl --base "
    ".train_tiny/results_f16.json --out $OUT --work /tmp/tt",
    "python3 tools/train_tiny/make_golden.py $OUT/results.json models/kjv-tiny.gguf "
    "tests/golden/kjv",
]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    res_path, model, out = sys.argv[1:]
    res = json.load(open(res_path))
    os.makedirs(out, exist_ok=True)
    sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
    assert sha == res["gguf"]["sha256"], "model file is not the one the reference ran on"
    lines = ["# halo embedded model (models/kjv-tiny.gguf): transformers' greedy continuations.",
             "# Per case: 'case NAME', 'prompt N ids', 'greedy N ids', 'margin N top1-top2 logit",
             "# margins'. Made by tools/train_tiny/make_golden.py; see manifest.json."]
    cases = []
    for p in res["prompts"]:
        n = len(p["tokens"])
        lines += [f"case {p['name']}",
                  f"prompt {len(p['ids'])} " + " ".join(map(str, p["ids"])),
                  f"greedy {n} " + " ".join(map(str, p["tokens"])),
                  f"margin {n} " + " ".join(f"{m:.6g}" for m in p["top1_margins"])]
        cases.append(dict(name=p["name"], prompt_text=p["text"] if p["name"] != "long" else None,
                          prompt_source=p.get("source"), prompt_tokens=len(p["ids"]),
                          continuation_text=p["continuation_text"],
                          min_top1_margin=min(p["top1_margins"])))
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    shutil.copyfile(res_path, os.path.join(out, "reference.json"))
    man = dict(
        model=dict(path="models/kjv-tiny.gguf", bytes=os.path.getsize(model), sha256=sha,
                   storage=res["gguf"].get("quant", "f16")),
        val_loss_f32=res["val_loss_f32_exported"],
        oracle="transformers DeepseekV4ForCausalLM, float32, CPU, one thread, eager attention and "
               "experts, weights read back from the GGUF with gguf-py (tools/oracle/reference.py); "
               "each step a full forward without KV cache (tools/train_tiny/reference_greedy.py)",
        versions=dict(res.get("reference_versions", res["versions"]),
                      gguf_py="llama.cpp v0.5.0 gguf-py"),
        training_versions=res["versions"],
        greedy_steps=len(res["prompts"][0]["tokens"]),
        tolerance="ids identical; a divergence is accepted only at a step whose recorded top-1 "
                  "margin is below 1e-3 (a near-tie), and ends that case; halo is checked with its "
                  "precise engine flag (f32 activations), the weights being Q8_0",
        cases=cases,
        commands=COMMANDS,
    )
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
