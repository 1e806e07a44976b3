#!/usr/bin/env python3
"""Renders tests/data/chat/conversations.json with DeepSeek V4's chat templates (jinja2), writing
tests/data/chat/<name>.<template>.txt: the reference halo's chat encoding must match byte for
byte (tests/text/test_chat.c).

The environment is the one transformers' apply_chat_template builds (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols; `tojson` as json.dumps(ensure_ascii=False) keeping key
order), plus `from_json` (json.loads), which the templates use for string tool-call arguments
and which llama.cpp's template engine provides.

Usage: /usr/bin/python3 tools/chat/render.py   (Debian 12 python3-jinja2 3.1.2)
"""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data", "chat")
TEMPLATES = {
    "v4": "deepseek-ai-DeepSeek-V4.jinja",
    "v4-flash-0731": "deepseek-ai-DeepSeek-V4-Flash-0731.jinja",
}
BOS = "<｜begin▁of▁sentence｜>"


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.filters["from_json"] = json.loads
    env.globals["raise_exception"] = raise_exception
    return env


def main():
    env = environment()
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        cases = json.load(f)
    names = set()
    for case in cases:
        name = case["name"]
        assert name not in names, name
        names.add(name)
        for key, file in TEMPLATES.items():
            with open(os.path.join(HERE, file), encoding="utf-8") as f:
                template = env.from_string(f.read())
            variables = dict(case["request"])
            variables["bos_token"] = BOS
            text = template.render(**variables)
            out = os.path.join(DATA, f"{name}.{key}.txt")
            with open(out, "w", encoding="utf-8", newline="") as f:
                f.write(text)
    print(f"rendered {len(cases)} conversations x {len(TEMPLATES)} templates with jinja2 "
          f"{jinja2.__version__} (python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
