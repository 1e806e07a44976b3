#!/usr/bin/env bash
# Runs a command and says how quiet the machine was meanwhile: the 1-minute load average before
# and after, and the CPU seconds that other processes used during it (all CPUs' busy time from
# /proc/stat less the command's own, children included). On a shared VM the load average after
# a 2-thread benchmark includes the benchmark itself, so the other processes' CPU time is what
# says whether a timing counts.
#   bench/cpu/quiet.sh [-w MAXLOAD] CMD ARGS...
# -w waits (up to 30 minutes) until the 1-minute load average is below MAXLOAD before starting.
# Prints "quiet: load BEFORE -> AFTER, others X.X cpu-s of Y s wall" to stderr at the end.
set -u
if [ "${1:-}" = -w ]; then
    max=$2
    shift 2
    for _ in $(seq 360); do
        awk -v m="$max" '{ exit !($1 < m) }' /proc/loadavg && break
        sleep 5
    done
fi
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
hz=$(getconf CLK_TCK)
l0=$(cut -d' ' -f1 /proc/loadavg)
b0=$(busy)
t0=$(date +%s.%N)
# The command's own CPU time, children included: bash's `times` in the subshell that ran it.
tf=$(mktemp)
("$@"; rc=$?; times >"$tf"; exit $rc)
rc=$?
self=$(tail -1 "$tf")
rm -f "$tf"
b1=$(busy)
t1=$(date +%s.%N)
l1=$(cut -d' ' -f1 /proc/loadavg)
python3 - "$l0" "$l1" "$b0" "$b1" "$hz" "$t0" "$t1" "$self" <<'PY' >&2
import re, sys
l0, l1, b0, b1, hz, t0, t1, self = sys.argv[1:]
def secs(s):  # bash `times`: "0m1.234s 0m0.100s"
    return sum(int(m) * 60 + float(x) for m, x in re.findall(r"(\d+)m([\d.]+)s", s))
others = (float(b1) - float(b0)) / float(hz) - secs(self)
print(f"quiet: load {l0} -> {l1}, others {max(others, 0):.1f} cpu-s of "
      f"{float(t1) - float(t0):.1f} s wall")
PY
exit $rc
