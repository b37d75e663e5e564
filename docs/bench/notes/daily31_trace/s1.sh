#!/bin/bash
# stage 1 (daily31_rule.md): main and a candidate (CAND=n) on §12.77's streams, in /tmp/daily31
cd /tmp/daily31
run() { # tag args...
  local tag=$1; shift
  local out
  if [ "$tag" = cand ]; then out=$(OUTLIERD_DAILY31=${CAND:-1} ./outlierd-cand replay "$@" --label-column label --verdicts-out v_cand_$(basename ${3%.csv})_$#.csv 2>&1); else out=$(./outlierd-main replay "$@" --label-column label --verdicts-out v_main_$(basename ${3%.csv})_$#.csv 2>&1); fi
  echo "$tag $*"; echo "$out" | grep -v '^{' ; echo "$out" | grep -o '"judged":[0-9]*,"kept":[0-9]*,"rejudge_ms":[0-9.]*'
}
for tag in ${TAGS:-main cand}; do
  run $tag --config tod.yaml --input d6.csv --window 90000
  run $tag --config tod.yaml --input d3.csv --window 90000
  run $tag --config tod.yaml --input d6s.csv --window 90000
  run $tag --config tod.yaml --input s1s.csv --window 90000
  run $tag --config tod.yaml --input s1s.csv
done
