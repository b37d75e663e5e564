#!/usr/bin/env bash
# Fails when the Go compiler fuses a multiply and an add anywhere in the module's (non-test) code.
#
# Why: the CPU paths are the CUDA kernels' bit-exact twins, and models, scores and verdicts must
# be the same bits on every host (a builder and its scorers may run on different machines). The
# Go spec lets a compiler fuse x*y+z into one rounding (an FMA); Go does so on arm64 (a GH200
# host, say), ppc64le, s390x and riscv64, and on amd64 at GOAMD64=v3, but not at amd64's default,
# where every result is rounded: the bits the parity tests check. An explicit conversion of the
# product, float64(x*y) + z, rounds it and is never fused (the spec), so the code writes every
# such product that way. This builds the module for arm64 and lists the fused instructions of
# its own source lines; there must be none. The cuda-tagged files need cgo, so on an amd64 host
# they are checked in a second, native build at GOAMD64=v3 (where Go fuses too), with the CUDA
# headers of .ci/cuda.sh (as staticcheck.sh uses them). That pass sees only x*y+z: amd64 fuses
# no subtraction, which arm64 does (an arm64 cgo build needs a cross C compiler; one run with
# aarch64-linux-gnu-gcc, -tags cuda, found no fused instruction on 2026-11-26).
# Usage: .ci/nofma.sh   (GO=go by default)
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
mod="$(pwd)/"
# fusedLines ENV... -- BUILDFLAGS...: builds ./... with -gcflags=-S (the assembly of the module's
# own packages only) and prints the source line of each fused instruction: arm64's F(N)MADD/F(N)MSUB
# (D and S) and amd64's VF(N)MADD/VF(N)MSUB 132/213/231 (SD and SS). Every such line counts,
# wherever its position says it is (a //line directive or inlined code from another module can
# place it outside this one). A build that fails is an error: its assembly was not checked.
fusedLines() {
	local env=() out
	while [[ "$1" != -- ]]; do env+=("$1"); shift; done
	shift
	if ! out="$(env "${env[@]}" "$GO" build "$@" -gcflags=-S ./... 2>&1)"; then
		echo "nofma: the build (${env[*]} $*) failed, so its code was not checked:" >&2
		env "${env[@]}" "$GO" build "$@" ./... >&2 || true
		return 1
	fi
	grep -E '[[:space:]](F(N?)M(ADD|SUB)[DS]|VF(N?)M(ADD|SUB)[0-9]+S[DS])[[:space:]]' <<<"$out" |
		grep -oE '\([^()[:space:]]*\.go:[0-9]+(\[[^]()]*\])?\)' | sed "s|^(||; s|)$||; s|${mod}||g" || true
}
fused="$(fusedLines GOARCH=arm64 GOOS=linux CGO_ENABLED=0 --)"
if [[ "$("$GO" env GOHOSTARCH)" == amd64 ]]; then
	eval "$(.ci/cuda.sh)"
	export CGO_CFLAGS CGO_LDFLAGS
	fused+=$'\n'"$(fusedLines GOAMD64=v3 -- -tags cuda)"
fi
fused="$(grep . <<<"$fused" | sort -u || true)"
if [[ -n "$fused" ]]; then
	echo "nofma: fused multiply-adds (arm64, or amd64 at GOAMD64=v3; write the product as float64(x*y) or float32(x*y)):"
	echo "$fused"
	exit 1
fi
