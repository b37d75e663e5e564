#!/bin/bash
# Issue 21's overlapped 1M-key row (BenchmarkKeyedStageDevice/gpu-overlap/keys=1000000, the pipeline's
# path on a GPU) at several batch sizes (an operator's ingest.batch_size), each size in its own process,
# the sizes alternated over ROUNDS rounds; the same records at every size: a prelude of PRELUDE_RECORDS
# (untimed, the steady state: docs/BENCHMARKS.md §13.1.17) and COUNT timed runs of RUN_RECORDS each.
# LONG=1 runs each size once more with RUN_RECORDS=80000000 and -test.count 1 (~40 s timed: collections
# the pacer's, as in a pipeline that runs for hours; the batches made first, ~9 GB at 20,000 a batch) with
# GODEBUG=gctrace=1. docs/BENCHMARKS.md §13.1.18.
#
# Builds (arguments, default main: $KEYED_DIR/NAME.test[.xz]) alternate within each size and round.
#
# Build here (the device has no Go):
#   eval "$(.ci/cuda.sh)"; go test -c -tags cuda -ldflags='-s -w' -o .gpubuild/s/main.test ./stages/detect; xz -T2 .gpubuild/s/main.test
# Run on the device (the `run` tool, kind nvidia-h100-x1, carry [".gpubuild/s"]), from the root:
#   KEYED_DIR=.gpubuild/s bash docs/bench/keyed_sizes.sh            # ~3 min: 2 rounds x 3 sizes
#   KEYED_DIR=.gpubuild/s SIZES="20000 100000" bash docs/bench/keyed_sizes.sh main other
# Prints a line a process (records/s, CPU ns and minor faults a record of each run) and writes the
# outputs to $OUT/sizes.tgz. Compare only processes of one call (§13.1.14: the host's weather).
set -u
D=${KEYED_DIR:?KEYED_DIR: the folder of the builds (NAME.test[.xz])}
: "${OUT:?OUT not set}"
ROUNDS=${ROUNDS:-2} COUNT=${COUNT:-3} SIZES=${SIZES:-20000 50000 100000}
PRELUDE_RECORDS=${PRELUDE_RECORDS:-2000000} RUN_RECORDS=${RUN_RECORDS:-4000000}
BUILDS=("$@"); [ ${#BUILDS[@]} -gt 0 ] || BUILDS=(main)
# (absolute: each process runs in stages/detect; KEYED_DIR and OUT may be relative or absolute)
D=$(cd "$D" && pwd) || exit 1
mkdir -p "$OUT/sizes" && R=$(cd "$OUT/sizes" && pwd) || exit 1
for b in "${BUILDS[@]}"; do
	[ -f "$D/$b.test" ] || xz -dk "$D/$b.test.xz" || exit 1
	chmod +x "$D/$b.test"
done
{ nvidia-smi -L; nproc; grep -m1 'model name' /proc/cpuinfo; date -u; } > "$R/device.txt" 2>&1
cat "$R/device.txt"
one() { # build size records count tag [GODEBUG]
	local b=$1; shift
	local f=$R/${b}_${4}_b$1.txt
	(cd stages/detect && GODEBUG=${5:-${GODEBUG:-}} OUTLIERD_BENCH_PRELUDE=$((PRELUDE_RECORDS / $1)) timeout 480 "$D/$b.test" \
		-test.run '^$' -test.bench "KeyedStageDevice/^gpu-overlap\$/keys=1000000/batch=$1\$" \
		-test.benchtime "$(($2 / $1))x" -test.count "$3" > "$f" 2>&1; echo "rc=$?" >> "$f")
	# (gctrace's lines may split a result line: read the metrics, not the lines)
	echo "== $b $4 batch $1: $(grep -o '[0-9.]* records/s\|[0-9.]* cpu-ns/record\|[0-9.]* faults/record' "$f" | paste -sd' ') $(tail -1 "$f")"
}
for r in $(seq 1 "$ROUNDS"); do
	for size in $SIZES; do for b in "${BUILDS[@]}"; do one "$b" "$size" "$RUN_RECORDS" "$COUNT" "round$r"; done; done
done
if [ "${LONG:-0}" = 1 ]; then
	for size in $SIZES; do for b in "${BUILDS[@]}"; do one "$b" "$size" 80000000 1 long gctrace=1; done; done
fi
date -u >> "$R/device.txt"
(cd "$OUT" && tar czf sizes.tgz sizes && rm -rf sizes)
