#!/bin/bash
# Runs every helper request carried under .carry/queue/NAME/ (overlay.tar + run.sh, "# budget_s: N"
# on a line of run.sh) in its own copy of this tree, one after another; each request's $OUT
# comes back as $OUT/NAME.tgz (the device tool returns at most 8 files).
set -u; out=${OUT:-/tmp/halo-out}; R=$(pwd)
t0=$(date +%s); el() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for q in .carry/queue/*/; do
  name=$(basename $q); w=/tmp/w-$name; rm -rf $w; mkdir -p $w/.carry
  tar --exclude=./.carry --exclude='./build*' -cf - . | tar -xf - -C $w
  cp -a .carry/cuda .carry/vulkan $w/.carry/ 2>/dev/null; [ -d .carry/llvk ] && cp -a .carry/llvk $w/.carry/
  [ -f $q/overlay.tar ] && tar xf $q/overlay.tar -C $w
  b=$(grep -m1 -oE "budget_s: *[0-9]+" $q/run.sh | grep -oE "[0-9]+"); b=${b:-120}
  o=/tmp/out-$name; rm -rf $o; mkdir -p $o
  el "== $name (budget $b s)"
  (cd $w && OUT=$o timeout -k 5 $b bash $R/$q/run.sh > $o/stdout.log 2>&1; echo "rc=$?" >> $o/stdout.log)
  tail -25 $o/stdout.log | sed "s/^/[$name] /"
  tar czf $out/$name.tgz -C $o .
  rm -rf $w
done
el "queue done"
