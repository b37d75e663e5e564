#!/usr/bin/env bash
# Regenerates the quality table of docs/BENCHMARKS.md §6 (hypercube density): ROC AUC and
# average precision of `outlierd hypercube` on every labelled set of ../shared/data, b = 4 and 7.
#
#   go build -o bin/outlierd ./cmd/outlierd
#   bash docs/bench/hypercube.sh > /tmp/hypercube.md
#
# Env: BIN (default bin/outlierd), DATA (default /work/shared/data), RAW (default
# /tmp/outlierd-quality), DEVICE (default cpu; the GPU gives identical scores), BINS (default "4 7").
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/outlierd}
DATA=${DATA:-/work/shared/data}
RAW=${RAW:-/tmp/outlierd-quality}
DEVICE=${DEVICE:-cpu}
BINS=${BINS:-"4 7"}
SETS="shuttle satimage-2 thyroid mammography pendigits cardio wdbc poker-rare"
mkdir -p "$RAW"
[ -x "$BIN" ] || { echo "build first: go build -o $BIN ./cmd/outlierd" >&2; exit 1; }
input() { # poker's rare classes (>= 5) as the outliers, as in quality.sh
  if [ "$1" = poker-rare ]; then
    local f="$RAW/poker-rare.csv"
    [ -s "$f" ] || awk -F, 'NR==1{sub(/class$/,"label"); print; next}
      { $NF = ($NF >= 5) ? 1 : 0; print }' OFS=, "$DATA/poker-hand-train.csv" >"$f"
    echo "$f"
  else
    echo "$DATA/$1.csv"
  fi
}
echo "Machine: $(uname -n), $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
echo
echo "| set | rows x dims | outliers | b | cells | ROC AUC | average precision | time |"
echo "|---|---|---|---|---|---|---|---|"
for s in $SETS; do
  f=$(input "$s")
  o=$(awk -F, 'NR>1 && $NF!=0 {c++} END {print c+0}' "$f")
  for b in $BINS; do
    j=$($BIN hypercube --input "$f" --label-column label --bins "$b" --device "$DEVICE" --json 2>/dev/null)
    echo "$j" >>"$RAW/hypercube.jsonl"
    python3 - "$s" "$o" "$j" <<'PY'
import json, sys
s, o, d = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
f = lambda v: "n/a" if v is None else "%.3f" % v
print(f"| {s} | {d['rows']} x {d['dims']} | {o} | {d['bins']} | {d['cells']} | {f(d.get('roc_auc'))} | {f(d.get('average_precision'))} | {d['elapsed_ms']:.0f} ms |")
PY
  done
done
