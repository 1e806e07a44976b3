#!/bin/bash
# tgj.sh NAME "ENV..." ARGS...: one `halo bench ... -o json` run of the Vulkan build with the
# given environment; prints NAME, each repetition's tok/s and the median of all but the first
# (the first runs during the clock ramp after the one-token warm-up). Needs the GPU env set.
name=$1; envs=$2; shift 2
o=${W:-/tmp}/tgj-$name
timeout ${TGJ_TIMEOUT:-60} env $envs HALO_VK_PROFILE=2 build-vk-dev/src/cli/halo bench "$@" -o json > $o.json 2> $o.err
rc=$?
python3 - "$name" "$envs" "$o.json" "$rc" <<'PY'
import json, sys, statistics
name, envs, path, rc = sys.argv[1:]
try:
    txt = open(path).read()
    data = json.loads(txt) if txt.strip().startswith('[') else [json.loads(l) for l in txt.splitlines() if l.strip()]
except Exception as e:
    print(f"{name:16s} rc={rc} no json ({e})"); sys.exit()
for r in data:
    s = r.get("samples_ts", [])
    med = statistics.median(s[1:]) if len(s) > 1 else (s[0] if s else 0)
    t = f"pp{r.get('n_prompt')}" if r.get('n_gen', 0) == 0 else f"tg{r.get('n_gen')}"
    print(f"{name:16s} {t:6s} median(2..) {med:8.2f}  samples " + " ".join(f"{x:.1f}" for x in s) + f"  [{envs}]")
PY
grep -o "vulkan stats: [0-9]* submissions, [0-9]* dispatches, [0-9]* barriers" $o.err | tail -1
