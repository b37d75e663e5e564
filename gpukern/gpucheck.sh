#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, with the test binary built on the development
# machine (no Go toolchain is needed there):
#   eval "$(.ci/cuda.sh)"; go test -c -tags cuda -o .gpubuild/gpukern.test ./gpukern/
#   gpukern/gpucheck.sh [.gpubuild/gpukern.test]
# With ACCELTEST set to a cuda-tagged test binary of internal/accel
# (go test -c -tags cuda -o .gpubuild/accel.test ./internal/accel), its GPU-vs-CPU tests run too
# (the exact weights of topn, micro-clustering, the hypercube detector; each also checks that no
# call fell back), and its benchmarks (the hypercube detector with the host steps) after gpukern's.
# It records the device, runs every test, runs the parity tests under compute-sanitizer memcheck
# and racecheck (with OUTLIERD_CUDA_SYNC=1 so a fault names its kernel), then the benchmarks.
# Logs go to $OUT (the device tool's output folder) or ./gpucheck-out.
set -uo pipefail
bin="${1:-.gpubuild/gpukern.test}"
out="${OUT:-gpucheck-out}"
mkdir -p "$out"
status=0
step() { # name, command...: runs the command, logs it to $out/name.log, records failure
	local name=$1
	shift
	echo "== $name: $*"
	if ! "$@" >"$out/$name.log" 2>&1; then
		echo "!! $name failed (exit $?)"
		status=1
	fi
	grep -E '^(--- FAIL|FAIL|ok|PASS|Benchmark|=+ ERROR SUMMARY|.*gpukern_test.go)' "$out/$name.log" | head -40
}
{
	date -u +%Y-%m-%dT%H:%M:%SZ
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
} | tee "$out/device.txt"
step tests "$bin" -test.v -test.count=1 -test.timeout 180s
san=(compute-sanitizer --error-exitcode 3 --print-limit 20)
if [ -n "${ACCELTEST:-}" ]; then
	step acceltests "$ACCELTEST" -test.run GPUMatchesCPU -test.v -test.count=1 -test.timeout 120s
fi
step memcheck env OUTLIERD_CUDA_SYNC=1 timeout 300 "${san[@]}" --tool memcheck "$bin" -test.run Parity -test.short -test.count=1 -test.timeout 280s
step racecheck env OUTLIERD_CUDA_SYNC=1 timeout 300 "${san[@]}" --tool racecheck "$bin" -test.run Parity -test.skip 'SolvingSetParity|DistributedParity' -test.short -test.count=1 -test.timeout 280s
# SolvingSet under racecheck: the sanitizers' small cases (every SolvingSet kernel, 2-D and 10-D)
# and the distributed parity ran to the end on an H200 x4 (issue 22); the whole parity set did not
# in 300 s. The grid case (3600 rows, 59 iterations) within 150 s on an H100.
step racecheck-ss env OUTLIERD_CUDA_SYNC=1 timeout 280 "${san[@]}" --tool racecheck "$bin" -test.run 'SolvingSetParity/(small|ties)|DistributedParity' -test.short -test.count=1 -test.timeout 270s
step bench env GPUKERN_SKIP_CPU=1 "$bin" -test.run '^$' -test.bench "${BENCH:-.}" -test.benchtime "${BENCHTIME:-10x}" -test.count 3 -test.timeout 300s
if [ -n "${ACCELTEST:-}" ]; then
	step accelbench env GPUKERN_SKIP_CPU=1 "$ACCELTEST" -test.run '^$' -test.bench "${ACCELBENCH:-.}" -test.benchtime "${BENCHTIME:-10x}" -test.count 3 -test.timeout 300s
fi
# The CPU twin on the same machine, for the speed-up (bounded: it can take long on 10-D data).
step cpu timeout 240 "$bin" -test.run '^$' -test.bench 'SolvingSet/cpu-g2d' -test.benchtime 1x -test.count 1
exit $status
