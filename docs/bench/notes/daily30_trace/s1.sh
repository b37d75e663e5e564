#!/bin/bash
# stage 1: main and candidate on §12.77's streams
cd /tmp/daily30
run() { # name binary-env args...
  local tag=$1; shift
  local out
  if [ "$tag" = cand ]; then out=$(OUTLIERD_DAILY30=1 ./outlierd-cand replay "$@" --label-column label 2>&1); else out=$(./outlierd-main replay "$@" --label-column label 2>&1); fi
  echo "$tag $*"; echo "$out" | grep -v '"level":"warn"\|columns not read' | grep -v '^{' ; echo "$out" | grep -o '"judged":[0-9]*,"kept":[0-9]*,"rejudge_ms":[0-9.]*'
}
for tag in ${TAGS:-main cand}; do
  run $tag --config tod.yaml --input d6.csv --window 90000
  run $tag --config tod.yaml --input d3.csv --window 90000
  run $tag --config tod.yaml --input d6s.csv --window 90000
  run $tag --config tod.yaml --input s1s.csv --window 90000
  run $tag --config tod.yaml --input s1s.csv
  run $tag --config C.yaml --input d6.csv --window 90000
  run $tag --config tod.yaml --input d6.csv
done
