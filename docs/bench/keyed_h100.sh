#!/bin/bash
# Issue 21's 1M-key rows on a GPU host (docs/BENCHMARKS.md §13.1.14), two builds alternated in one
# call: the synchronous `gpu` row and the overlapped `gpu-overlap` row (the pipeline's path on a
# GPU) of BenchmarkKeyedStageDevice at 1,000,000 keys and 20,000-record batches, one process a
# round and build (both rows' million keys warm in it, 15-26 s each), with the host's
# transparent-huge-page setting and the most huge pages any process held (sampled every 4 s).
#
# Build here (the device has no Go), two detect test binaries into a folder git ignores:
#   eval "$(.ci/cuda.sh)"
#   go test -c -tags cuda -ldflags='-s -w' -o .gpubuild/k/a.test ./stages/detect   # e.g. main
#   (cd <other worktree> && go test -c -tags cuda -ldflags='-s -w' -o /path/.gpubuild/k/b.test ./stages/detect)
#   xz -T2 .gpubuild/k/*.test                                                        # ~3.4 MB each
# Run on the device (the `run` tool: kind nvidia-h100-x1, carry [".gpubuild/k"]), from the root:
#   KEYED_DIR=.gpubuild/k ROUNDS=3 BATCHES=100 bash docs/bench/keyed_h100.sh a b
# COUNT (default 2) is -test.count. SETTLES="none 30s" runs each build's process once per value a round, the benchmark waiting that
# long before each timed run (OUTLIERD_BENCH_SETTLE, whole seconds; none: no wait): the host's
# memory settling after the warm-up, §13.1.15 (it does not: §13.1.17). PRELUDES="none 100" does the
# same with OUTLIERD_BENCH_PRELUDE: that many batches of the timed size through the freshly warmed
# stage, untimed, before its timed runs (the steady state; §13.1.17). A long run, whose collections
# are the pacer's rather than the testing package's (§13.1.17): BATCHES=4000 COUNT=1 (the batches
# are made on every core; 4,000 of 20,000 records hold about 9 GB, 2.2 MB a batch, until processed). It prints one line a process (records/s and CPU ns a record of each run of each row) and
# writes everything under $OUT/keyed.tgz. About 50 s a process at 100 batches: 3 rounds of 2
# builds take ~5 minutes. Compare only processes of one call: the host's spread between calls,
# and while it is busy, is wider than most changes (§13.1.14).
set -u
D=${KEYED_DIR:?KEYED_DIR: the folder of the builds}
D=$(cd "$D" && pwd) || exit 1 # (absolute: each process runs in stages/detect)
: "${OUT:?OUT not set}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1
ROUNDS=${ROUNDS:-3} BATCHES=${BATCHES:-100} COUNT=${COUNT:-2}
ROWS=${ROWS:-'KeyedStageDevice/^gpu(-overlap)?$/keys=1000000/batch=20000'}
[ $# -ge 1 ] || { echo "usage: keyed_h100.sh BUILD [BUILD...] (names of \$KEYED_DIR/NAME.test[.xz])"; exit 2; }
for b in "$@"; do
	[ -f "$D/$b.test" ] || xz -dk "$D/$b.test.xz" || exit 1
	chmod +x "$D/$b.test"
done
R=$OUT/keyed; mkdir -p "$R"
M=/sys/kernel/mm/transparent_hugepage
{ nvidia-smi -L; nproc; uname -r; date -u; echo "enabled: $(cat $M/enabled)"; echo "defrag: $(cat $M/defrag)"; } > "$R/device.txt" 2>&1
cat "$R/device.txt"
summary() { grep -E '^Benchmark' "$1" | awk '{split($1,n,"/"); r="";c="";h="";e="";f="";y=""; for(i=2;i<=NF;i++){if($(i+1)=="records/s")r=$i; if($(i+1)=="cpu-ns/record")c=$i; if($(i+1)=="huge-GB-start")h=$i; if($(i+1)=="huge-GB-end")e=$i; if($(i+1)=="faults/record")f=$i; if($(i+1)=="sys-ns/record")y=$i}; printf " %s %s rec/s (%s cpu-ns, %s sys, %s faults, huge %s->%s GB);", n[2], r, c, y, f, h, e}'; }
for r in $(seq 1 "$ROUNDS"); do
	for b in "$@"; do
		for st in ${SETTLES:-none}; do for pr in ${PRELUDES:-none}; do
			f=$R/${b}_$r settle= prelude=
			if [ "$st" != none ]; then f=${f}_settle$st settle=$st; fi
			if [ "$pr" != none ]; then f=${f}_prelude$pr prelude=$pr; fi
			f=$f.txt
			st_s=${settle%s}                                                                   # (none: 0 s)
			wait_s=$(( 90 + COUNT * (40 + BATCHES / 40 + 2 * ${st_s:-0}) + 2 * ${prelude:-0} / 5 ))
			(while sleep 4; do grep AnonHugePages /proc/meminfo | awk '{print $2}'; done) > "$f.huge" &
			sp=$!
			(cd stages/detect && OUTLIERD_BENCH_SETTLE=$settle OUTLIERD_BENCH_PRELUDE=$prelude timeout $wait_s "$D/$b.test" -test.run '^$' -test.bench "$ROWS" -test.benchtime "${BATCHES}x" -test.count "$COUNT" > "$f" 2>&1; echo "rc=$?" >> "$f")
			kill $sp
			echo "== $b${settle:+ settle $settle}${prelude:+ prelude $prelude} round $r:$(summary "$f") $(tail -1 "$f") most huge pages $(sort -n "$f.huge" | tail -1 | awk '{printf "%.1f GB", $1/1048576}')"
		done; done
	done
done
date -u >> "$R/device.txt"
(cd "$OUT" && tar czf keyed.tgz keyed && rm -rf keyed)
