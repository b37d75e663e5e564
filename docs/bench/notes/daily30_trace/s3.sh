#!/bin/bash
cd /tmp/daily30
run() { local tag=$1; shift; local out
  if [ "$tag" = cand ]; then out=$(OUTLIERD_DAILY30=1 ./outlierd-cand replay "$@" --label-column label 2>&1); else out=$(./outlierd-main replay "$@" --label-column label 2>&1); fi
  echo "$tag $*"; echo "$out" | grep -v '^{\|columns not read'; }
for tag in main cand; do
  run $tag --config tod.yaml --input h1.csv --window 90000
  run $tag --config tod.yaml --input h1.csv
  run $tag --config tod.yaml --input h2.csv --window 90000
  run $tag --config todk.yaml --input h3.csv --window 90000
  run $tag --config todk2k.yaml --input h3.csv --window 90000
done
