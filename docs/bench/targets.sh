#!/usr/bin/env bash
# Issue 20's generated targets on seeds never used for a choice (docs/BENCHMARKS.md §12.27):
# spikes (every one flagged, precision >= 0.9, AP >= 0.95), clean (<= 0.1 % flagged) and drift
# (<= 1 % flagged), default config, file order, seeds 7-16 (the figures of §11 and §12 use 1-6).
#     bash docs/bench/targets.sh            # ~2 min on 2 cores; SEEDS="7 8" for fewer
#     B=/tmp/x/outlierd B_GIVEN=1 CONFIG=detect.yaml bash docs/bench/targets.sh   # a binary, a config
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${B:-bin/outlierd}
[[ -n "${B_GIVEN:-}" ]] || go build -o "$B" ./cmd/outlierd
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
row() { # name, outlierd gen arguments
	"$B" gen --kind sensors --head 2000 $2 >"$T/s.csv"
	"$B" replay ${CONFIG:+--config "$CONFIG"} --input "$T/s.csv" --label-column label --min-records 2000 --json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
f = lambda k: 'n/a' if d.get(k) is None or d.get('average_precision') is None else f'{d[k]:.3f}'
print(f\"$1\t{d['rows']}\t{d['flagged']}\t{100 * d['flagged'] / d['rows']:.3f} %\tP {f('precision')}\tR {f('recall')}\tAP {f('average_precision')}\")"
}
for s in ${SEEDS:-7 8 9 10 11 12 13 14 15 16}; do
	row "spikes s$s" "--rows 20000 --spike-rate 0.001 --spike-min 20 --spike-max 30 --seed $s"
	row "spikes+20 s$s" "--rows 20000 --spike-rate 0.001 --spike-min 20 --spike-max 20 --seed $s"
	row "spikes 8 sensors s$s" "--rows 20000 --sensors 8 --spike-rate 0.001 --spike-min 20 --spike-max 30 --anomaly-sensor -1 --seed $s"
	row "clean s$s" "--rows 20000 --spike-rate 0 --seed $s"
	row "clean 100k s$s" "--rows 100000 --spike-rate 0 --seed $s"
	row "clean quantised s$s" "--rows 20000 --spike-rate 0 --resolution 1,0.5,1 --seed $s"
	row "drift 1 sd/5000 s$s" "--rows 20000 --sensors 4 --spike-rate 0 --drift 1 --drift-every 5000 --seed $s"
	row "drift 1 sd/50000 s$s" "--rows 200000 --sensors 4 --spike-rate 0 --drift 1 --drift-every 50000 --seed $s"
done
