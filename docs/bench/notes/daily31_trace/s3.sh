#!/bin/bash
# stage 3 (daily31_rule.md): main and a candidate (CAND=n) on the held-out streams, in /tmp/daily31
cd /tmp/daily31
run() { local tag=$1 name=$2; shift 2; local out
  if [ "$tag" = cand ]; then out=$(OUTLIERD_DAILY31=${CAND:-3} ./outlierd-cand replay "$@" --label-column label --verdicts-out v3_${tag}_$name.csv 2>&1); else out=$(./outlierd-main replay "$@" --label-column label --verdicts-out v3_${tag}_$name.csv 2>&1); fi
  echo "$tag $name $*"; echo "$out" | grep -v '^{\|columns not read'; }
for tag in ${TAGS:-main cand}; do
  run $tag h1w --config tod.yaml --input h1.csv --window 90000
  run $tag h1d --config tod.yaml --input h1.csv
  run $tag h2w --config tod.yaml --input h2.csv --window 90000
  run $tag h3k --config todk.yaml --input h3.csv --window 90000
  run $tag h3k2k --config todk2k.yaml --input h3.csv --window 90000
  run $tag h4w --config tod.yaml --input h4.csv --window 90000
  run $tag h5w --config tod.yaml --input h5.csv --window 90000
done
