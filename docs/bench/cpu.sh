#!/usr/bin/env bash
# Runs the CPU benchmarks of ./stages/... COUNT times (default 3) and prints, per benchmark and
# metric, the median and the range, with the machine and its load average before and after.
#   bash docs/bench/cpu.sh > /tmp/cpu.md          (BENCH='regexp' to narrow, COUNT=5)
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNT=${COUNT:-3}
BENCH=${BENCH:-.}
PKGS=${PKGS:-./stages/...}
raw=$(mktemp)
echo "Machine: $(uname -n), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench "$BENCH" -benchtime 1x -count "$COUNT" $PKGS >"$raw" 2>&1 || { cat "$raw" >&2; exit 1; }
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Command: go test -run '^\$' -bench '$BENCH' -benchtime 1x -count $COUNT $PKGS"
echo
python3 - "$raw" <<'PY'
import collections, re, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
pkg = ""
for line in open(sys.argv[1]):
    if line.startswith("pkg:"):
        pkg = line.split()[1].replace("github.com/outlierd/outlierd/", "")
    m = re.match(r"^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$", line)
    if not m:
        continue
    f = m.group(3).split()
    for v, unit in zip(f[0::2], f[1::2]):
        runs[(pkg, m.group(1))][unit].append(float(v))
print("| package | benchmark | metric | median | range | runs |")
print("|---|---|---|---|---|---|")
fmt = lambda v: f"{v:.4g}"
for (pkg, name), metrics in runs.items():
    for unit, vals in metrics.items():
        print(f"| {pkg} | {name} | {unit} | {fmt(statistics.median(vals))} | {fmt(min(vals))} - {fmt(max(vals))} | {len(vals)} |")
PY
rm -f "$raw"
