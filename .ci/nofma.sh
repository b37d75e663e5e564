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
# headers of .ci/cuda.sh (as staticcheck.sh uses them).
# Usage: .ci/nofma.sh   (GO=go by default)
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
mod="$(pwd)/"
fused="$(GOARCH=arm64 GOOS=linux CGO_ENABLED=0 "$GO" build -gcflags=-S ./... 2>&1 |
	grep -E '[[:space:]]F(N?)M(ADD|SUB)[DS][[:space:]]' |
	grep -oE "\(${mod}[^)]*\.go:[0-9]+\)" | sed "s|(${mod}||; s|)||" | sort -u || true)"
if [[ "$("$GO" env GOHOSTARCH)" == amd64 ]]; then
	eval "$(.ci/cuda.sh)"
	export CGO_CFLAGS CGO_LDFLAGS
	fused+="$(GOAMD64=v3 "$GO" build -tags cuda -gcflags=-S ./... 2>&1 |
		grep -E '[[:space:]]VF(N?)M(ADD|SUB)[0-9]+S[DS][[:space:]]' |
		grep -oE "\(${mod}[^)]*\.go:[0-9]+\)" | sed "s|(${mod}||; s|)||" | sort -u || true)"
fi
if [[ -n "$fused" ]]; then
	echo "nofma: fused multiply-adds on arm64 (write the product as float64(x*y) or float32(x*y)):"
	echo "$fused"
	exit 1
fi
