#!/usr/bin/env bash
# .ci/deps.sh: installs what the test broker needs (Java 17+, Maven, openssl) and the headless
# Chromium of the live view's browser test (cmd/outlierd/liveview_test.go) when they are
# missing, from Debian's packages. Idempotent: on a machine that has them it does nothing.
set -euo pipefail
missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v openssl >/dev/null || missing+=(openssl)
# The browser (Debian's chromium-headless-shell: /usr/bin/chromium-headless-shell, the binary in
# /usr/lib/chromium) is required in CI (CI=true), where the browser test must run, and installed
# wherever this runs as root; elsewhere the browser test skips and says why.
if ! command -v chromium-headless-shell >/dev/null; then
  if [[ ${CI:-} == true || $(id -u) -eq 0 ]]; then
    missing+=(chromium-headless-shell)
  else
    echo "deps.sh: chromium-headless-shell is not installed: the live view's browser test will skip" >&2
  fi
fi
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "deps.sh: installing ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then
  echo "deps.sh: need root to install ${missing[*]} (or install them yourself)" >&2
  exit 1
fi
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
