#!/usr/bin/env python3
"""The transformers reference for an already exported GGUF (GPU machine): the greedy
continuations of the test prompts (reference_greedy.py, CPU float32, one process a prompt) and
the validation loss of the file's weights (float32 on the GPU), merged into a copy of train.py's
results.json. Used when the GGUF is re-exported after training (e.g. F16 -> Q8_0).

  reference_run.py --gguf M.gguf --tokenizer tokenizer.json --corpus CHAPTERS.jsonl
                   --base results.json --out DIR [--work DIR]
(CHAPTERS.jsonl: corpus.py's output, or only its validation lines.)
"""
import argparse
import hashlib
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import config  # noqa: E402
import train  # noqa: E402
import tokenizer as tokmod  # noqa: E402
from train import log, reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    for a in ("--gguf", "--tokenizer", "--corpus", "--base", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--work", default="/tmp/train_tiny")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    import tokenizers
    import transformers
    import numpy as np

    res = json.load(open(args.base))
    tok = tokenizers.Tokenizer.from_file(args.tokenizer)
    chapters = tokmod.read_chapters(args.corpus, None)
    prompts = train.make_prompts(tok, chapters)
    val = [d for d in chapters if d["split"] == "val"]
    ids, starts = [], []
    for e in tok.encode_batch([d["text"] for d in val], add_special_tokens=False):
        starts.append(len(ids))
        ids += [config.BOS_ID] + e.ids + [config.EOS_ID]
    ids, starts = np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64)
    cfg = dict(config.MODEL, vocab_size=tok.get_vocab_size())
    with torch.no_grad():
        m = reference.build_model(cfg, reference.read_gguf(args.gguf)).to("cuda")
        v = train.evaluate(m, ids, starts, res["train"]["seq_len"], "cuda", autocast=False)
        del m
    log(f"validation loss of {args.gguf} (fp32): {v:.4f}")
    prompts = train.run_references(args.gguf, prompts, args.work, tok)
    blob = open(args.gguf, "rb").read()
    before = dict(gguf=res["gguf"], val_loss_f32_exported=res["val_loss_f32_exported"],
                  prompts=[dict(name=p["name"], tokens=p.get("tokens"),
                                top1_margins=p.get("top1_margins"),
                                continuation_text=p.get("continuation_text"))
                           for p in res["prompts"]])
    res.setdefault("earlier_exports", []).append(before)
    res.update(
        gguf=dict(name=os.path.basename(args.gguf), bytes=len(blob),
                  sha256=hashlib.sha256(blob).hexdigest(), quant=config.QUANT),
        val_loss_f32_exported=v, prompts=prompts,
        reference_versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                                tokenizers=tokenizers.__version__, numpy=np.__version__),
        reference_seconds=time.time() - train.T0)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, default=float)
    log("done")


if __name__ == "__main__":
    main()
