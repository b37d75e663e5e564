#!/usr/bin/env bash
# Regenerates the quality tables of docs/BENCHMARKS.md (sections 1 and 2): outlierd topn and
# outlierd density on every labelled set of ../shared/data, and density on the synthetic
# 'one' / 'three' sets. Prints Markdown tables on stdout; raw JSON lines go to $RAW.
#
#   go build -o bin/outlierd ./cmd/outlierd
#   bash docs/bench/quality.sh [topn|density|synthetic|all] > /tmp/quality.md
#
# Env: DATA (default /work/shared/data), RAW (default /tmp/outlierd-quality), CAP_CLUSTER and
# CAP_RECORD (seconds a density run may take before it is stopped and reported as "> cap";
# defaults 300 and 90: the sampling modes at record granularity take minutes per thousand
# rows on 2 CPU cores), DEVICE (default cpu), SETS (space-separated file stems).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/outlierd}
DATA=${DATA:-/work/shared/data}
RAW=${RAW:-/tmp/outlierd-quality}
CAP_CLUSTER=${CAP_CLUSTER:-300}
CAP_RECORD=${CAP_RECORD:-90}
DEVICE=${DEVICE:-cpu}
SETS=${SETS:-"shuttle satimage-2 thyroid mammography pendigits cardio wdbc poker-rare"}
what=${1:-all}
mkdir -p "$RAW"
[ -x "$BIN" ] || { echo "build first: go build -o $BIN ./cmd/outlierd" >&2; exit 1; }

# poker's class column is no outlier label: the rare classes (>= 5, 106 of 25010 rows) are
# taken as the outliers, in a derived file outside the repository.
input() {
  if [ "$1" = poker-rare ]; then
    local f="$RAW/poker-rare.csv"
    [ -s "$f" ] || awk -F, 'NR==1{sub(/class$/,"label"); print; next}
      { $NF = ($NF >= 5) ? 1 : 0; print }' OFS=, "$DATA/poker-hand-train.csv" >"$f"
    echo "$f"
  else
    echo "$DATA/$1.csv"
  fi
}
outliers() { awk -F, 'NR>1 && $NF!=0 {c++} END {print c+0}' "$1"; }
f4() { python3 -c 'import sys; v=sys.argv[1]; print("n/a" if v in ("", "None") else "%.3f" % float(v))' "$1"; }
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2]))' "$1" "$2"; }

echo "Machine: $(uname -n), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
echo

if [ "$what" = topn ] || [ "$what" = all ]; then
  echo "### outlierd topn (SolvingSet, raw units, m=100, seed 1, n = number of labelled outliers)"
  echo
  echo "| set | rows x dims | n | k | precision@n | ROC AUC | iterations | \|S\| | distances / N(N-1)/2 | time |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for s in $SETS; do
    f=$(input "$s"); n=$(outliers "$f")
    for k in 10 50; do
      cmd="$BIN topn --input $f --label-column label --k $k --n $n --device $DEVICE --json"
      j=$($cmd 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("outliers"); print(json.dumps(d))')
      echo "$j" >>"$RAW/topn.jsonl"
      python3 - "$s" "$j" <<'PY'
import json, sys
s, d = sys.argv[1], json.loads(sys.argv[2])
pairs = d["rows"] * (d["rows"] - 1) / 2
f = lambda v: "n/a" if v is None else "%.3f" % v
print(f"| {s} | {d['rows']} x {d['dims']} | {d['n']} | {d['k']} | {f(d.get('precision_at_n'))} | {f(d.get('roc_auc'))} | "
      f"{d['iterations']} | {d['solving_set_size']} | {100*d['distance_computations']/pairs:.2f}% | {d['elapsed_ms']/1000:.2f} s |")
PY
    done
  done
  echo
fi

# density_row SET FILE MODE GRAN EXTRA...: one table row (a run past its cap reads "> cap").
density_row() {
  local s=$1 f=$2 mode=$3 gran=$4; shift 4
  local cap=$CAP_CLUSTER; [ "$gran" = record ] && cap=$CAP_RECORD
  local out rc=0
  out=$(timeout "$cap" "$BIN" density --input "$f" --label-column label --mode "$mode" --granularity "$gran" --device "$DEVICE" "$@" --json 2>&1) || rc=$?
  if [ $rc -eq 124 ]; then
    echo "| $s | $mode | $gran | — | — | — | — | > $cap s (stopped) |"; return
  fi
  if [ $rc -ne 0 ]; then
    if grep -q "refused" <<<"$out"; then echo "| $s | $mode | $gran | — | — | — | — | refused (r > 20) |"; return; fi
    echo "| $s | $mode | $gran | error: $(tail -1 <<<"$out" | tr '|' '/') |||||"; return
  fi
  out=$(tail -1 <<<"$out"); echo "$out" >>"$RAW/density.jsonl"
  python3 - "$s" "$out" <<'PY'
import json, sys
s, d = sys.argv[1], json.loads(sys.argv[2])
f = lambda v: "n/a" if v is None else "%.3f" % v
print(f"| {s} | {d['mode']} | {d['granularity']} | {f(d.get('precision'))} | {f(d.get('recall'))} | {f(d.get('f1'))} | "
      f"{f(d.get('roc_auc'))} | {d['elapsed_ms']/1000:.2f} s ({d['flagged']} flagged) |")
PY
}

if [ "$what" = density ] || [ "$what" = all ]; then
  echo "### outlierd density (eta = delta = 0.5, q = 200, s = 800, 4 passes, seed 1, uncertainty derived: std_j * U(0,1) * 2.0)"
  echo
  echo "| set | mode | granularity | precision | recall | F1 | ROC AUC | time |"
  echo "|---|---|---|---|---|---|---|---|"
  for s in $SETS; do
    f=$(input "$s")
    for mode in independent rollup restricted averaging; do
      for gran in cluster record; do
        density_row "$s" "$f" "$mode" "$gran" --uncertainty-multiplier 2.0
      done
    done
  done
  echo
fi

if [ "$what" = synthetic ] || [ "$what" = all ]; then
  ROWS=${SYN_ROWS:-10000}; DIMS=${SYN_DIMS:-6}
  echo "### outlierd density on the synthetic sets ($ROWS rows x $DIMS dims, 5% outliers, offset 2, all dims, uncertainty columns from gen, cluster granularity)"
  echo
  echo "| set | mode | granularity | precision | recall | F1 | ROC AUC | time |"
  echo "|---|---|---|---|---|---|---|---|"
  for kind in one three; do
    f="$RAW/$kind.csv"
    "$BIN" gen --kind "$kind" --rows "$ROWS" --dims "$DIMS" --seed 1 >"$f"
    for mode in independent rollup restricted averaging; do
      density_row "$kind" "$f" "$mode" cluster --uncertainty-suffix _sd
    done
  done
  echo
fi
