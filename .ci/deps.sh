#!/usr/bin/env bash
# .ci/deps.sh: installs what the test broker needs (Java 17+, Maven, openssl) when it is
# missing, from Debian's packages. Idempotent: on a machine that has them it does nothing.
set -euo pipefail
missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v openssl >/dev/null || missing+=(openssl)
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "deps.sh: installing ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then
  echo "deps.sh: need root to install ${missing[*]} (or install them yourself)" >&2
  exit 1
fi
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
