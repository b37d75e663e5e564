#!/usr/bin/env bash
# .ci/with-kafka.sh CMD...: runs CMD with a real local Apache Kafka broker up (KAFKA_BOOTSTRAP
# exported, and the KAFKA_SASL_SSL_BOOTSTRAP... variables of its secured listeners) and stops
# the broker afterwards, whatever CMD's outcome. A broker that was already running before is
# left running (with whatever listeners it was started with).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/deps.sh"
# A broker started here also gets the secured listeners (KAFKA_SECURITY=1 in kafka.sh: SASL_SSL
# and mTLS, for internal/core/kafkasec's integration tests; no measurable start-up cost beyond the
# certificates); KAFKA_SECURITY=0 leaves them out, and those tests then skip.
export KAFKA_SECURITY="${KAFKA_SECURITY:-1}"
started=0
if ! "$here/kafka.sh" status >/dev/null 2>&1; then
  # stdout is the export lines, evaluated below: not printed (one is the test broker's password).
  "$here/kafka.sh" start >/dev/null
  started=1
fi
cleanup() { if [[ $started == 1 ]]; then "$here/kafka.sh" stop || true; fi; }
trap cleanup EXIT
eval "$("$here/kafka.sh" env)"
export KAFKA_BOOTSTRAP
"$@"
