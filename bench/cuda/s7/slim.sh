#!/bin/bash
# slim.sh off|bench|on: the device tool carries at most 64 MiB with the working tree (~57 MB of
# it tracked files), so data a call does not need leaves the working tree before the call and
# comes back from git after it. off: tokenizer fixtures and fuzz corpora (tests still run);
# bench: also the golden fixtures (42 MB; a call that only benchmarks, carrying peers' binaries);
# golden: off plus the embedded model's GGUF (the Vulkan tests, golden included, need neither);
# on: restore. Never commit while slimmed.
cd "$(dirname "$0")/../../.."
case $1 in
  off) rm -rf tests/tokenizer tests/fuzz/corpus ;;
  bench) rm -rf tests/tokenizer tests/fuzz/corpus tests/golden ;;
  golden) rm -rf tests/tokenizer tests/fuzz/corpus models/kjv-tiny.gguf ;;
  on) git checkout -- tests/tokenizer tests/fuzz/corpus tests/golden models/kjv-tiny.gguf &&
      git status --short | grep -v '^??' | head ;;
esac
