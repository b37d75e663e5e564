#!/usr/bin/env bash
# .ci/staticcheck.sh [PACKAGES...]: staticcheck (the go.mod tool, honnef.co/go/tools) over the
# CPU build and the CUDA build (-tags cuda) in one -matrix run, so that code used only by one
# build (gpukern's device-side fields and helpers are used only with -tags cuda) is reported as
# unused only when no build uses it. The CUDA build needs cuda.h for cgo: .ci/cuda.sh fetches it
# once into ~/.cache/outlierd/cuda (make cuda-check needs the same cache) and prints the flags.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(.ci/cuda.sh)"
export CGO_CFLAGS CGO_LDFLAGS
if [[ $# -eq 0 ]]; then set -- ./...; fi
printf 'cpu:\ncuda: -tags=cuda\n' | "${GO:-go}" tool staticcheck -matrix "$@"
