#!/usr/bin/env bash
# .ci/with-kafka.sh CMD...: runs CMD with a real local Apache Kafka broker up (KAFKA_BOOTSTRAP
# exported) and stops the broker afterwards, whatever CMD's outcome. A broker that was already
# running before is left running.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
started=0
if ! "$here/kafka.sh" status >/dev/null 2>&1; then
  "$here/kafka.sh" start
  started=1
fi
cleanup() { if [[ $started == 1 ]]; then "$here/kafka.sh" stop || true; fi; }
trap cleanup EXIT
eval "$("$here/kafka.sh" env)"
export KAFKA_BOOTSTRAP
"$@"
