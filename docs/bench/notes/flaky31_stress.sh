#!/usr/bin/env bash
# flaky31 stress on the 16-core device machine: 8 slots of 2 pinned cores each (a 2-core CI
# machine each), every slot running its test binary again and again until the deadline.
# usage (from the repository root on the device machine, test binaries gzipped in
# .gpubuild/f31/, built here with `go test -c [-race]` with flaky31_harness.patch applied):
#   bash .gpubuild/f31/stress.sh SECONDS SLOTSPEC...   where SLOTSPEC = "binary|env|args"
# env may hold BUSY=1 (two busy loops on the slot's cores) and RUNFILE=name (-test.run read
# from .gpubuild/f31/name.txt: a shard's test names); slot 5 takes cores 10-15 (one slow test).
# Each run's summary line goes to $OUT/summary.txt; failing or cut runs' -v logs to logs.tgz.
set -u
ROOT=$(pwd); B=/tmp/f31bin; mkdir -p $B
for z in $ROOT/.gpubuild/f31/*.gz; do n=$(basename $z .gz); [ -x $B/$n ] || { gunzip -c $z > $B/$n; chmod +x $B/$n; }; done
dur=$1; shift
END=$(( $(date +%s) + dur ))
S=$OUT/summary.txt; : > $S
nproc >> $S; cat /proc/loadavg >> $S
slot() {
  local id=$1 spec=$2 cores="$((2*$1)),$((2*$1+1))"; [ $1 = 5 ] && cores=10-15
  IFS='|' read -r bin envs args <<<"$spec"
  local dir=$ROOT/stages/detect; case $bin in proclus*) dir=$ROOT/internal/algo/proclus;; esac
  local busy=()
  if [[ $envs == *BUSY=1* ]]; then
    for k in 1 2; do taskset -c $cores bash -c 'while :; do :; done' & busy+=($!); done
  fi
  local runarg=()
  if [[ $envs =~ RUNFILE=([A-Za-z0-9_]+) ]]; then runarg=(-test.run "$(cat $ROOT/.gpubuild/f31/${BASH_REMATCH[1]}.txt)"); fi
  local n=0
  while [ $(date +%s) -lt $((END - 20)) ]; do
    n=$((n+1)); local log=$OUT/s$id.r$n.log t0=$(date +%s)
    ( cd $dir && env $envs timeout -s QUIT $((END - $(date +%s))) taskset -c $cores $B/$bin -test.v -test.count=1 -test.timeout 30m "${runarg[@]}" $args ) > $log 2>&1
    local rc=$? t1=$(date +%s)
    local passes=$(grep -c -- '--- PASS' $log) fails=$(grep -c -- '--- FAIL' $log) races=$(grep -c 'WARNING: DATA RACE' $log)
    echo "slot $id [$spec] run $n rc=$rc ${passes}pass ${fails}fail ${races}race $((t1-t0))s" >> $S
    if [ $rc = 0 ] && [ $races = 0 ]; then tail -3 $log > $log.tail; rm $log; fi
  done
  for p in "${busy[@]}"; do kill $p; done
}
i=0
for spec in "$@"; do slot $i "$spec" & i=$((i+1)); done
wait
cat /proc/loadavg >> $S
cd $OUT && tar czf logs.tgz s*.log* && rm -f s*.log*
cat $S
