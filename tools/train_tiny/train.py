#!/usr/bin/env python3
"""Trains the embedded default model on the GPU machine, exports it and computes the reference.

One run does everything, in order, saving each result as soon as it exists:
  1. vocabulary: tokenizer.py's byte-level BPE on the training split -> OUT/tokenizer.json;
  2. token streams: each chapter as BOS + ids + EOS, concatenated (train and validation);
  3. training: transformers' DeepseekV4ForCausalLM (config.MODEL, eager attention and experts),
     AdamW, bf16 autocast, a time budget (config.TRAIN), validation every ~30 s, the best
     validation state kept;
  4. export: export.py's GGUF (config.QUANT: Q8_0 matrices) -> OUT/<name>.gguf.part{0,1}
     (split for transfer)
     and the F16-rounded state dict -> OUT/ckpt_{experts,rest}.npz;
  5. reference: reference_greedy.py (transformers, float32, CPU, one thread) on the exported
     GGUF for every prompt, in parallel processes -> OUT/results.json with everything else.
Needs torch, transformers 5.17 (deepseek_v4), tokenizers, numpy and gguf-py (PYTHONPATH).

  train.py --corpus kjv_chapters.jsonl --out OUT [--work DIR] [--seconds N]
"""
import argparse
import copy
import hashlib
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import config  # noqa: E402
import export  # noqa: E402
import reference  # noqa: E402  (tools/oracle)
import tokenizer as tokmod  # noqa: E402

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def streams(tok, chapters):
    out = {}
    for split in ("train", "val"):
        docs = [d for d in chapters if d["split"] == split]
        enc = tok.encode_batch([d["text"] for d in docs], add_special_tokens=False)
        ids, starts = [], []
        for e in enc:
            starts.append(len(ids))
            ids += [config.BOS_ID] + e.ids + [config.EOS_ID]
        out[split] = (np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64))
    return out


def init_model(cfg, tc):
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdl

    torch.manual_seed(tc["seed"])
    hc = reference.hf_config(cfg)
    hc.attention_dropout = tc["attention_dropout"]
    model = mdl.DeepseekV4ForCausalLM(hc).float()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    rng = np.random.default_rng(tc["seed"])
    H, ql = cfg["hidden_size"], cfg["q_lora_rank"]
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    std = 0.02
    done = set()

    def normal(p, s=std):
        torch.nn.init.normal_(p, std=s)
        done.add(id(p))

    def const(p, v):
        torch.nn.init.constant_(p, v)
        done.add(id(p))

    # Every parameter explicitly (transformers' own _init_weights only runs on some paths):
    # GPT-2-style N(0, 0.02) matrices, unit norms, zero sinks / biases / HC bases.
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
                normal(mod.weight)
            elif isinstance(mod, mdl.DeepseekV4RMSNorm):
                const(mod.weight, 1.0)
            elif isinstance(mod, mdl.DeepseekV4Experts):
                normal(mod.gate_up_proj)
                normal(mod.down_proj)
            elif isinstance(mod, (mdl.DeepseekV4TopKRouter, mdl.DeepseekV4HashRouter)):
                normal(mod.weight)
            elif isinstance(mod, mdl.DeepseekV4Attention):
                const(mod.sinks, 0.0)
            elif isinstance(mod, mdl.DeepseekV4HyperConnection):
                normal(mod.fn)
                const(mod.base, 0.0)
                const(mod.scale, 1.0)
            elif isinstance(mod, mdl.DeepseekV4HyperHead):
                normal(mod.hc_fn)
                const(mod.hc_base, 0.0)
                const(mod.hc_scale, 1.0)
            if isinstance(mod, (mdl.DeepseekV4HCACompressor, mdl.DeepseekV4CSACompressor,
                                mdl.DeepseekV4Indexer)):
                const(mod.position_bias, 0.0)
            if isinstance(mod, mdl.DeepseekV4TopKRouter):
                mod.e_score_correction_bias.zero_()
        missing = [n for n, p in model.named_parameters() if id(p) not in done]
        assert not missing, missing
        for mod in model.modules():
            if isinstance(mod, mdl.DeepseekV4HashRouter):
                # frozen token -> experts table, distinct experts per token (ORACLES.md §4)
                t = np.stack([rng.permutation(E)[:k] for _ in range(cfg["vocab_size"])])
                mod.tid2eid.copy_(torch.from_numpy(t.astype(np.int64)))
            if isinstance(mod, mdl.DeepseekV4Indexer):
                # The lightning indexer only picks rows (top-k): no gradient reaches it through
                # transformers' forward, so it keeps its initial weights. Give them unit-scale
                # scores (well-separated top-k decisions) rather than std-0.02 near-ties.
                torch.nn.init.normal_(mod.kv_proj.weight, std=H ** -0.5)
                torch.nn.init.normal_(mod.gate_proj.weight, std=0.5 * H ** -0.5)
                torch.nn.init.normal_(mod.position_bias, std=0.5)
                torch.nn.init.normal_(mod.q_b_proj.weight, std=ql ** -0.5)
                torch.nn.init.normal_(mod.scorer.weights_proj.weight, std=H ** -0.5)
                mod.requires_grad_(False)
    for n, p in model.named_parameters():
        assert torch.isfinite(p).all(), n
    return model, mdl


class Balancer:
    """Auxiliary-loss-free load balancing (DeepSeek-V3 §2.1.2): after each step, raise the
    routing bias of under-loaded experts and lower it for over-loaded ones by a fixed rate."""

    def __init__(self, model, mdl, rate):
        self.rate, self.on, self.routers = rate, True, []
        for mod in model.modules():
            if isinstance(mod, mdl.DeepseekV4TopKRouter):
                mod._tt_counts = torch.zeros(mod.num_experts, device="cuda")
                mod.register_forward_hook(self._hook)
                self.routers.append(mod)

    def _hook(self, mod, inp, out):
        if self.on:
            mod._tt_counts += torch.bincount(out[2].reshape(-1), minlength=mod.num_experts).float()

    @torch.no_grad()
    def step(self):
        imb = []
        for r in self.routers:
            c = r._tt_counts
            r.e_score_correction_bias += self.rate * torch.sign(c.mean() - c)
            imb.append((c.max() / c.mean().clamp(min=1)).item())
            c.zero_()
        return max(imb) if imb else 1.0


def add_dropout(model, mdl, p):
    """Residual dropout (on the embeddings and on every attention and MoE output) through
    forward hooks, active in training mode only; transformers' V4 has attention dropout only."""
    def hook(mod, inp, out):
        if not mod.training or p <= 0:
            return out
        if isinstance(out, tuple):
            return (F.dropout(out[0], p, True),) + tuple(out[1:])
        return F.dropout(out, p, True)

    model.model.embed_tokens.register_forward_hook(hook)
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(hook)
        layer.mlp.register_forward_hook(hook)


def batch(rng, ids, starts, B, S, device):
    rows = []
    for i in range(B):
        if i % 2 == 0:  # a chapter from its BOS on
            o = int(starts[rng.integers(len(starts))])
            o = min(o, len(ids) - S - 1)
            rows.append(ids[o:o + S + 1])
        else:  # BOS, then text from anywhere
            o = int(rng.integers(0, len(ids) - S))
            rows.append(np.concatenate([[config.BOS_ID], ids[o:o + S]]))
    x = torch.from_numpy(np.stack(rows)).to(device)
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def evaluate(model, ids, starts, S, device, autocast=True):
    """Mean next-token loss over the validation chapters, a window of S from each chapter's BOS
    (the stream runs on into the next chapters; the last windows end at the stream's end)."""
    model.eval()
    tot, n = 0.0, 0
    xs = []
    for s in starts:
        o = min(int(s), len(ids) - S - 1)
        xs.append(ids[o:o + S + 1])
    xs = torch.from_numpy(np.stack(xs)).to(device)
    for i in range(0, len(xs), 16):
        x = xs[i:i + 16]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                               reduction="sum")
        tot += loss.item()
        n += x[:, 1:].numel()
    model.train()
    return tot / n


@torch.no_grad()
def causality_gap(model, ids, S, device):
    """Max |logit difference| over the first half of a sequence when only its second half
    changes: 0 unless the masks (sliding window, compressed rows, indexer picks) leak."""
    model.eval()
    x = torch.from_numpy(ids[:S].copy()).to(device)[None].repeat(2, 1)
    x[1, S // 2:] = torch.flip(x[1, S // 2:], [0])
    lg = model(input_ids=x, use_cache=False).logits.float()
    model.train()
    return (lg[0, :S // 2] - lg[1, :S // 2]).abs().max().item()


def train(model, mdl, data, tc, deadline, device):
    ids, starts = data["train"]
    vids, vstarts = data["val"]
    B, S = tc["batch"], tc["seq_len"]
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 and "position_bias" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([dict(params=decay, weight_decay=tc["weight_decay"]),
                             dict(params=no_decay, weight_decay=0.0)],
                            lr=tc["lr"], betas=tc["betas"], fused=True)
    bal = Balancer(model, mdl, tc["bias_update_rate"])
    add_dropout(model, mdl, tc["dropout"])
    rng = np.random.default_rng(tc["seed"])
    model.train()
    t_start = time.time()
    budget = max(30.0, min(tc["train_seconds"], deadline - t_start))
    log(f"training for {budget:.0f} s: batch {B} x {S} tokens")
    step, seen, next_eval, best, hist = 0, 0, tc["eval_every_seconds"], (float("inf"), None, 0), []
    run_loss = None
    while True:
        el = time.time() - t_start
        if el >= budget:
            break
        prog = el / budget
        lr = tc["lr"] * min(1.0, (step + 1) / tc["warmup_steps"]) * (
            tc["min_lr_frac"] + (1 - tc["min_lr_frac"]) * 0.5 * (1 + math.cos(math.pi * prog)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(rng, ids, starts, B, S, device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), tc["grad_clip"])
        opt.step()
        imb = bal.step()
        step += 1
        seen += x.numel()
        lv = loss.item()
        run_loss = lv if run_loss is None else 0.95 * run_loss + 0.05 * lv
        if step <= 3 or step % 50 == 0:
            log(f"step {step} loss {lv:.4f} (avg {run_loss:.4f}) lr {lr:.2e} gnorm {gn:.2f} "
                f"max load/mean {imb:.2f} {seen / (time.time() - t_start):.0f} tok/s")
        if time.time() - t_start >= next_eval or time.time() - t_start >= budget:
            next_eval += tc["eval_every_seconds"]
            bal.on = False
            v = evaluate(model, vids, vstarts, S, device)
            bal.on = True
            hist.append(dict(step=step, seconds=round(time.time() - t_start, 1), tokens=seen,
                             train_loss=run_loss, val_loss=v, lr=lr))
            log(f"eval step {step}: val {v:.4f} train(avg) {run_loss:.4f}")
            if v < best[0]:
                best = (v, copy.deepcopy(model.state_dict()), step)
    log(f"trained {step} steps, {seen} tokens in {time.time() - t_start:.0f} s; best val "
        f"{best[0]:.4f} at step {best[2]}")
    model.load_state_dict(best[1])
    return dict(steps=step, tokens=seen, seconds=time.time() - t_start, best_val=best[0],
                best_step=best[2], history=hist)


def hf_sd_numpy(cfg, T):
    return {k: v.numpy() for k, v in reference.hf_state_dict(cfg, T).items()}


def cpu_env():
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")


def f16_state(model):
    """State dict as numpy: float tensors of 2+ dims rounded to F16 (what the GGUF stores),
    1-D float32, hash tables int64."""
    out = {}
    for k, v in model.state_dict().items():
        a = v.detach().cpu().numpy()
        if a.dtype == np.float32 and a.ndim >= 2:
            a = a.astype(np.float16)
        out[k] = a
    return out


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def make_prompts(tok, chapters):
    """The test prompts: BOS + the HF tokenizer's ids of each config.PROMPTS text, and BOS + the
    first LONG_TOKENS - 1 ids of the validation chapter LONG_CHAPTER."""
    vt = {(d["book"], d["chapter"]): d for d in chapters}
    long_doc = vt[config.LONG_CHAPTER]
    assert long_doc["split"] == "val", long_doc["split"]
    prompts = [dict(name=n, text=t, ids=[config.BOS_ID] + encode(tok, t))
               for n, t in config.PROMPTS]
    lids = [config.BOS_ID] + encode(tok, long_doc["text"])
    lids = lids[:config.LONG_TOKENS]
    prompts.append(dict(name="long", text=tok.decode(lids[1:]), ids=lids,
                        source=f"{long_doc['book']} {long_doc['chapter']} (validation), first "
                               f"{config.LONG_TOKENS - 1} tokens"))
    return prompts


def run_references(gpath, prompts, work, tok):
    """reference_greedy.py for every prompt, in parallel CPU processes; fills each prompt's
    tokens, margins and decoded continuation."""
    procs = []
    for p in prompts:
        pin = os.path.join(work, f"prompt_{p['name']}.json")
        json.dump(dict(name=p["name"], ids=p["ids"]), open(pin, "w"))
        cmd = [sys.executable, os.path.join(HERE, "reference_greedy.py"), gpath, pin,
               os.path.join(work, f"greedy_{p['name']}.json"), str(config.GREEDY_STEPS)]
        procs.append(subprocess.Popen(cmd, env=cpu_env()))
    for pr in procs:
        pr.wait()
    for p in prompts:
        g = os.path.join(work, f"greedy_{p['name']}.json")
        if os.path.exists(g):
            r = json.load(open(g))
            p.update(r)
            p["continuation_text"] = tok.decode(r["tokens"])
            log(f"{p['name']}: {p['text'][-60:]!r} -> {p['continuation_text']!r} "
                f"(min top-1 margin {min(r['top1_margins']):.4g})")
        else:
            log(f"WARNING: no reference for {p['name']}")
    return prompts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/train_tiny")
    ap.add_argument("--deadline", type=float, default=450.0, help="training ends by this many "
                    "seconds after start")
    ap.add_argument("--seconds", type=float, default=None, help="override the training budget")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    import tokenizers
    import transformers
    versions = dict(torch=torch.__version__, transformers=transformers.__version__,
                    tokenizers=tokenizers.__version__, numpy=np.__version__,
                    python=sys.version.split()[0],
                    gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    log("versions", versions)
    tc = dict(config.TRAIN)
    if args.seconds:
        tc["train_seconds"] = args.seconds

    chapters = tokmod.read_chapters(args.corpus, None)
    tok_path = os.path.join(args.out, "tokenizer.json")
    tok = tokmod.train([d["text"] for d in chapters if d["split"] == "train"], tok_path)
    data = streams(tok, chapters)
    chars = {s: sum(len(d["text"]) for d in chapters if d["split"] == s) for s in ("train", "val")}
    log(f"vocabulary {tok.get_vocab_size()}; tokens train {len(data['train'][0])} val "
        f"{len(data['val'][0])}; chars/token {chars['train'] / len(data['train'][0]):.2f}")
    cfg = dict(config.MODEL, vocab_size=tok.get_vocab_size())
    if cfg["vocab_size"] != config.VOCAB:
        log(f"WARNING: vocabulary has {cfg['vocab_size']} tokens, not {config.VOCAB}")

    device = "cuda"
    model, mdl = init_model(cfg, tc)
    model.to(device)
    nparams = sum(p.numel() for p in model.parameters())
    log(f"parameters {nparams}")
    # preflight on the initial weights, so a broken export or reference fails in seconds rather
    # than after training: export, round trip, GGUF, and a 2-step reference in the background
    sd0 = {k: (v.astype(np.float32) if v.dtype == np.float16 else v)
           for k, v in f16_state(model).items()}
    t0 = export.gguf_tensors(cfg, sd0)
    export.check_roundtrip(cfg, sd0, t0, hf_sd_numpy)
    pre_gguf = os.path.join(args.work, "preflight.gguf")
    export.write(pre_gguf, cfg, t0, tok_path)
    pre_prompt = os.path.join(args.work, "preflight_prompt.json")
    json.dump(dict(name="preflight", ids=[config.BOS_ID] + encode(tok, "In the beginning")),
              open(pre_prompt, "w"))
    pre = subprocess.Popen([sys.executable, os.path.join(HERE, "reference_greedy.py"), pre_gguf,
                            pre_prompt, os.path.join(args.work, "preflight_greedy.json"), "2"],
                           env=cpu_env())
    gap = causality_gap(model, data["train"][0], tc["seq_len"], device)
    assert gap < 1e-3, f"future tokens change past logits by {gap}"
    v0 = evaluate(model, *data["val"], tc["seq_len"], device)
    log(f"preflight: export ok; causality gap {gap:.3g}; initial val loss {v0:.4f}")
    summary = train(model, mdl, data, tc, T0 + args.deadline, device)
    log(f"preflight reference exit code {pre.wait()}")

    # export first, so nothing trained is lost if a later step fails
    sd = f16_state(model)
    routed = {k for k in sd if "experts." in k and "shared" not in k}  # two files < 16 MiB each
    np.savez(os.path.join(args.out, "ckpt_experts.npz"), **{k: sd[k] for k in routed})
    np.savez(os.path.join(args.out, "ckpt_rest.npz"), **{k: v for k, v in sd.items()
                                                         if k not in routed})
    sd32 = {k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in sd.items()}
    tensors = export.gguf_tensors(cfg, sd32)
    try:
        export.check_roundtrip(cfg, sd32, tensors, hf_sd_numpy)
        log("export: round trip through tools/oracle/reference.hf_state_dict is exact")
    except AssertionError as e:
        log("WARNING: export round trip failed:", repr(e)[:300])
    gpath = os.path.join(args.work, config.GGUF_NAME)
    size = export.write(gpath, cfg, tensors, tok_path, export.DESCRIPTION, quant=config.QUANT)
    blob = open(gpath, "rb").read()
    sha = hashlib.sha256(blob).hexdigest()
    half = 15 * 2 ** 20
    for i, part in enumerate((blob[:half], blob[half:])):
        with open(os.path.join(args.out, f"{config.GGUF_NAME}.part{i}"), "wb") as f:
            f.write(part)
    log(f"wrote {gpath}: {size} bytes, sha256 {sha}")

    # final validation loss of the exported weights, float32 without autocast
    with torch.no_grad():
        T = reference.read_gguf(gpath)
        ref_model = reference.build_model(cfg, T).to(device)
        val_f32 = evaluate(ref_model, data["val"][0], data["val"][1], tc["seq_len"], device,
                           autocast=False)
        gap = causality_gap(ref_model, data["val"][0], tc["seq_len"], device)
        del ref_model
    log(f"validation loss of the exported GGUF weights (fp32): {val_f32:.4f}; "
        f"causality gap {gap:.3g}")

    # reference greedy continuations, one CPU process per prompt
    prompts = run_references(gpath, make_prompts(tok, chapters), args.work, tok)

    res = dict(model=config.NAME, config=cfg, train=tc, versions=versions, parameters=nparams,
               gguf=dict(name=config.GGUF_NAME, bytes=size, sha256=sha, quant=config.QUANT),
               corpus=dict(chapters=len(chapters), chars=chars,
                           tokens={s: int(len(data[s][0])) for s in data}),
               training=summary, val_loss_f32_exported=val_f32, prompts=prompts,
               seconds_total=time.time() - T0)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, default=float)
    log("done")


if __name__ == "__main__":
    main()
