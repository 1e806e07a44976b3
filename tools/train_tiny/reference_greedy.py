#!/usr/bin/env python3
"""Greedy continuation of one prompt by transformers from a GGUF's weights (the expected ids of
tests/golden/kjv). Uses tools/oracle/reference.py as is: read_gguf (gguf-py dequantizes every
tensor to float32), build_model (DeepseekV4ForCausalLM, float32, eager attention and experts,
bit-exact load) and its Margins hooks. CPU, one thread, deterministic algorithms; no KV cache:
each step is a full forward of the whole sequence, like reference.py's greedy runs.

For every step it records the chosen id, the top-1 minus top-2 logit margin, and the smallest
routing margin (non-hash MoE layers) and indexer top-k margin (CSA layers) over all positions
of that forward, so a later mismatch can be told apart from a near-tie.

  reference_greedy.py MODEL.gguf PROMPT.json OUT.json STEPS   (PROMPT.json: {"name", "ids"})
"""
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import config  # noqa: E402
import reference  # noqa: E402  (tools/oracle)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    gguf_path, prompt_path, out_path = sys.argv[1:4]
    steps = int(sys.argv[4])
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    t0 = time.time()
    prompt = json.load(open(prompt_path))
    T = reference.read_gguf(gguf_path)
    cfg = dict(config.MODEL, vocab_size=int(T["token_embd.weight"].shape[0]))
    model = reference.build_model(cfg, T)
    hooks = reference.Margins(model, cfg)
    ids = list(prompt["ids"])
    toks, top1, route, index = [], [], [], []
    for _ in range(steps):
        hooks.reset()
        row = reference.forward(model, ids)[-1]
        m = hooks.per_position(len(ids))
        v, i = torch.topk(row, 2)
        tok = int(i[0])
        toks.append(tok)
        top1.append(float(v[0] - v[1]))
        route.append(float(np.min(m[:, 0])))
        index.append(float(np.min(m[:, 1])))
        ids.append(tok)
    import transformers
    out = dict(name=prompt["name"], prompt_ids=prompt["ids"], tokens=toks, top1_margins=top1,
               min_route_margins=route, min_index_margins=index,
               versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                             numpy=np.__version__),
               threads=torch.get_num_threads(), seconds=time.time() - t0)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{prompt['name']}: {len(toks)} tokens in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
