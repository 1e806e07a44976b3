#!/bin/bash
# slim.sh off: remove data the device runs do not need (tokenizer fixtures, fuzz corpora) from the
# working tree so the carried paths fit the 64 MiB transfer; slim.sh on: restore them from git.
cd /work/main
case $1 in
  off) rm -rf tests/tokenizer tests/fuzz/corpus ;;
  final) rm -rf tests/tokenizer tests/fuzz/corpus tests/golden/llamacpp ;;
  on) git checkout -- tests/tokenizer tests/fuzz/corpus tests/golden/llamacpp && git status --short | grep -v '^??' | head ;;
esac
