#!/usr/bin/env bash
# Fetches the CUDA 11.8 driver-API header (cuda.h) and the libcuda link stub that
# gorgonia.org/cu v0.9.6 needs at build time, into a cache outside the repository,
# and prints the CGO flags to build with `-tags cuda`.
#
# Why 11.8: CUDA 13's cuda.h maps cuCtxCreate to a 4-argument cuCtxCreate_v4 that
# cu v0.9.6 does not compile against; a binary built against 11.8 headers runs on
# every newer driver (driver API symbols are versioned and kept). See docs/GPU.md.
#
# Idempotent: a second run finds the cache and only prints the flags.
# Usage:  eval "$(.ci/cuda.sh)"   # exports CGO_CFLAGS and CGO_LDFLAGS
# A user with a CUDA toolkit installed can set CGO_CFLAGS/CGO_LDFLAGS to it instead.
set -euo pipefail

dir="${OUTLIERD_CACHE:-$HOME/.cache/outlierd}/cuda"
hdr="$dir/usr/include/cuda.h"
stub="$dir/usr/lib/x86_64-linux-gnu/stubs/libcuda.so"

if [[ ! -s "$hdr" || ! -s "$stub" ]]; then
	echo "cuda.sh: fetching cuda.h and the libcuda stub into $dir" >&2
	src=/etc/apt/sources.list.d/debian.sources
	if [[ -f "$src" ]] && ! grep -q 'non-free' "$src"; then
		# Debian keeps the CUDA packages in non-free.
		sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' "$src"
	fi
	apt-get update -qq >&2
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	# apt-get download installs nothing: it only fetches the .deb (about 774 MB).
	(cd "$tmp" && apt-get download -qq nvidia-cuda-dev >&2)
	mkdir -p "$dir"
	dpkg-deb --fsys-tarfile "$tmp"/nvidia-cuda-dev_*.deb |
		tar -x -C "$dir" ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
	grep -q 'define CUDA_VERSION 11080' "$hdr" ||
		echo "cuda.sh: warning: $hdr is not CUDA 11.8; cu v0.9.6 needs 11.x or 12.x headers" >&2
fi

echo "export CGO_CFLAGS=\"-I$dir/usr/include\""
echo "export CGO_LDFLAGS=\"-L$dir/usr/lib/x86_64-linux-gnu/stubs\""
