#!/usr/bin/env bash
# .ci/kafka.sh {start|stop|restart|status|env} — a single-node Apache Kafka broker (KRaft, broker and
# controller in one JVM) on 127.0.0.1 for the integration tests.
#
# Version: Apache Kafka 4.1.1 (override with KAFKA_VERSION). Kafka 4.x was chosen over 3.9.x
# because github.com/segmentio/kafka-go v0.4.51 interoperates with it: Kafka 4.0 dropped the
# oldest protocol versions (KIP-896), and kafka-go's issue #1360 about it is closed. Verified
# here with stages/ingest's integration tests: TestSourceRealBroker produces to a 3-partition
# topic, consumes it through a consumer group (JoinGroup/SyncGroup/Fetch), commits offsets
# (OffsetCommit) and checks them with OffsetFetch; TestSourceRebalanceRealBroker adds a second
# member (rebalance), then removes the first (LeaveGroup, rebalance back). If a future kafka-go or Kafka release breaks that, set KAFKA_VERSION=3.9.1.
#
# How the broker gets here: the jars come from Maven Central through `mvn -q
# dependency:copy-dependencies` on .ci/kafka/pom.xml (kafka_2.13 and its runtime closure, plus
# the slf4j->log4j2 binding the Kafka distribution ships), cached outside the repository in
# ${OUTLIERD_CACHE:-$HOME/.cache/outlierd}/kafka-<version>/libs. A fresh machine needs only
# java (17+) and mvn; the first `start` downloads 43 MB, later ones reuse the cache.
#
# Runtime state (server.properties, data, broker.log, broker.pid) lives in
# <cache>/kafka-<version>/run-<port>. `start` wipes the data directory before a fresh start (it
# is a test broker: tests use unique topic and group names, but an empty log keeps runs
# independent) and is a no-op when the broker is already running. `stop` sends SIGTERM (a
# controlled shutdown), waits up to 60 s and only then SIGKILLs.
#
# Keeping the data: `restart` (stop, then start on the same data) and `KAFKA_KEEP_DATA=1
# start` (start a stopped broker on the data it left) keep the topics, their messages and
# the consumer groups' committed offsets (and, with KAFKA_SECURITY=1, the certificates and
# the SASL password), so a test can take a broker down and bring it back as an outage would
# (pipeline/edges_outage_test.go does). Without data to keep (never started, or the run
# directory removed) they start fresh. The previous broker.log is kept as broker.log.1, so
# the readiness check below only sees the new start.
#
# Environment:
#   KAFKA_VERSION  Kafka release (default 4.1.1)
#   KAFKA_PORT     client listener port (default 39092; the controller uses KAFKA_PORT+1)
#   OUTLIERD_CACHE cache root (default $HOME/.cache/outlierd)
#   KAFKA_HEAP     JVM heap (default 512m: the machine is shared)
#   KAFKA_KEEP_DATA 1: `start` keeps the data of the broker's last run (default 0: wipe it);
#                  `restart` always keeps it
#   KAFKA_SECURITY 1 adds two secured listeners to the same broker (default 0: PLAINTEXT only):
#                  SASL_SSL on KAFKA_PORT+2 (SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, one
#                  user) and SSL with required client certificates ("MTLS") on KAFKA_PORT+3.
#                  `start` then generates, with openssl, a throw-away CA, a server certificate
#                  (SANs 127.0.0.1, localhost) and a client certificate, and a random password
#                  for the SASL user (SCRAM credentials stored by `kafka-storage format
#                  --add-scram`, PLAIN by the listener's JAAS config), all in
#                  <run>/security (mode 700), and also prints the exports of
#                  KAFKA_SASL_SSL_BOOTSTRAP, KAFKA_MTLS_BOOTSTRAP, KAFKA_TLS_CA,
#                  KAFKA_TLS_CLIENT_CERT, KAFKA_TLS_CLIENT_KEY, KAFKA_SASL_USERNAME and
#                  KAFKA_SASL_PASSWORD (internal/core/kafkasec's integration test reads them).
#                  Whether a running broker has them is fixed at its start. Measured
#                  (2026-11-21, same machine, load 8-12, jars cached): start 13.1 and 17.7 s
#                  with KAFKA_SECURITY=1, 13.5 and 16.3 s without (noise: the JVM start
#                  dominates; the openssl part alone takes 1.4 s); internal/core/kafkasec's
#                  integration tests then take 18-20 s.
# `start` prints `export KAFKA_BOOTSTRAP=127.0.0.1:<port>` on stdout (logs go to stderr), so
# `eval "$(.ci/kafka.sh start)"` starts the broker and sets the variable; `env` prints it again.
#
# Verification (2026-11-21, this shared 2-core machine, Java 17.0.15, mvn 3.8.7, Go 1.26.8,
# kafka-go v0.4.51):
#   rm -rf cache and a private maven repo; .ci/kafka.sh start       33 s (download ~19 s, 46 jars,
#                                                                  43 MB; JVM start + KRaft 14 s)
#   .ci/kafka.sh start with the jars cached                        9-16 s (depends on load)
#   KAFKA_BOOTSTRAP=127.0.0.1:39092 go test ./stages/ingest -run RealBroker -v
#     TestSourceRealBroker (produce 120 to 3 partitions, group fetch, dead letters, commit,
#     OffsetFetch) and TestSourceRebalanceRealBroker (a second member joins, JoinGroup/SyncGroup
#     rebalance, the first leaves, committed offsets reach the ends): PASS, about 10 s in all
#     on a fresh broker (its first group creates __consumer_offsets), 4.5 s on a warm one.
#   .ci/kafka.sh stop                                              2-3.5 s (controlled shutdown)
#   start when running, stop when stopped: no-ops; status exits 3 when not running.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
version="${KAFKA_VERSION:-4.1.1}"
port="${KAFKA_PORT:-39092}"
cport="$((port + 1))"
heap="${KAFKA_HEAP:-512m}"
security="${KAFKA_SECURITY:-0}"
keep_data="${KAFKA_KEEP_DATA:-0}"
sasl_port="$((port + 2))"
mtls_port="$((port + 3))"
cache="${OUTLIERD_CACHE:-$HOME/.cache/outlierd}/kafka-${version}"
libs="${cache}/libs"
run="${cache}/run-${port}"
pidfile="${run}/broker.pid"
logfile="${run}/broker.log"
secdir="${run}/security"
startwait="${KAFKA_START_WAIT:-120}" # seconds; a cold JVM on a busy 2-core machine is slow

log() { echo "kafka.sh: $*" >&2; }

# fetch_libs downloads the broker jars once; the .complete marker makes an interrupted
# download retry instead of leaving a half-filled libs directory in use.
fetch_libs() {
  if [[ -f "${libs}/.complete" ]]; then
    return
  fi
  command -v mvn >/dev/null || { log "mvn not found (needed to fetch the Kafka jars)"; exit 1; }
  log "fetching Apache Kafka ${version} jars from Maven Central into ${libs}"
  mkdir -p "${cache}"
  local tmp
  tmp="$(mktemp -d "${cache}/libs.tmp.XXXXXX")"
  # -B: no colour codes in CI logs; includeScope=runtime: what the broker needs to run.
  # Output to a file: mvn -q still prints colour resets, and its errors matter only on failure.
  if ! mvn -q -B -Dstyle.color=never -f "${here}/kafka/pom.xml" dependency:copy-dependencies \
    -Dkafka.version="${version}" -DincludeScope=runtime -DoutputDirectory="${tmp}" >"${cache}/mvn.log" 2>&1; then
    cat "${cache}/mvn.log" >&2
    rm -rf "${tmp}"
    log "mvn failed (log above)"
    exit 1
  fi
  rm -rf "${libs}"
  mv "${tmp}" "${libs}"
  touch "${libs}/.complete"
}

running() {
  [[ -f "${pidfile}" ]] && kill -0 "$(cat "${pidfile}")" 2>/dev/null
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# gen_security writes the throw-away CA, the server and client certificates, the SASL user's
# password and the exports (secdir/env) for KAFKA_SECURITY=1.
gen_security() {
  command -v openssl >/dev/null || { log "openssl not found (needed for KAFKA_SECURITY=1)"; exit 1; }
  mkdir -p "${secdir}"
  chmod 700 "${secdir}"
  (
    cd "${secdir}"
    openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=outlierd test CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -keyout ca-key.pem -out ca.pem
    # issue NAME CN EXTENSIONS: a key and a certificate signed by the CA.
    issue() {
      openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$1-key.pem" -out "$1.csr"
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 7 \
        -extfile "$1.ext" -out "$1.pem"
    }
    issue server localhost "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
    issue client outlierd-test-client "extendedKeyUsage=clientAuth"
    # Kafka's PEM key store: the unencrypted PKCS#8 key, then the certificate.
    cat server-key.pem server.pem >server-keystore.pem
    openssl rand -hex 16 >sasl-password
  ) >"${run}/openssl.log" 2>&1 || { cat "${run}/openssl.log" >&2; log "certificate generation failed"; exit 1; }
  cat >"${secdir}/env" <<EOF
export KAFKA_SASL_SSL_BOOTSTRAP=127.0.0.1:${sasl_port}
export KAFKA_MTLS_BOOTSTRAP=127.0.0.1:${mtls_port}
export KAFKA_TLS_CA=${secdir}/ca.pem
export KAFKA_TLS_CLIENT_CERT=${secdir}/client.pem
export KAFKA_TLS_CLIENT_KEY=${secdir}/client-key.pem
export KAFKA_SASL_USERNAME=outlierd
export KAFKA_SASL_PASSWORD=$(cat "${secdir}/sasl-password")
EOF
}

# print_env prints the exports for the running broker (the secured listeners' when it has them).
print_env() {
  echo "export KAFKA_BOOTSTRAP=127.0.0.1:${port}"
  if [[ -f "${secdir}/env" ]]; then
    cat "${secdir}/env"
  fi
}

write_config() {
  mkdir -p "${run}"
  local listeners="PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}"
  local advertised="PLAINTEXT://127.0.0.1:${port}"
  local protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [[ ${security} == 1 ]]; then
    listeners+=",SASL_SSL://127.0.0.1:${sasl_port},MTLS://127.0.0.1:${mtls_port}"
    advertised+=",SASL_SSL://127.0.0.1:${sasl_port},MTLS://127.0.0.1:${mtls_port}"
    protocols+=",SASL_SSL:SASL_SSL,MTLS:SSL"
  fi
  cat >"${run}/server.properties" <<EOF
# Written by .ci/kafka.sh: a single-node KRaft test broker.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${cport}
listeners=${listeners}
advertised.listeners=${advertised}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=${protocols}
log.dirs=${run}/data
auto.create.topics.enable=true
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
# Small segments so retention and compaction paths are exercised; 1 MiB is Kafka 4's minimum.
log.segment.bytes=1048576
# Internal topics on one broker: replication factor 1, few partitions (fast first group use).
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# No 3 s wait before the first consumer-group rebalance: tests would otherwise idle.
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
EOF
  if [[ ${security} == 1 ]]; then
    chmod 600 "${run}/server.properties" # it holds the PLAIN user's password
    cat >>"${run}/server.properties" <<EOF
# KAFKA_SECURITY=1: TLS for both secured listeners from PEM files (no Java key stores).
ssl.keystore.type=PEM
ssl.keystore.location=${secdir}/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=${secdir}/ca.pem
listener.name.mtls.ssl.client.auth=required
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_outlierd="$(cat "${secdir}/sasl-password")";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
  fi
  cat >"${run}/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${logfile}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
EOF
}

java_cmd() {
  java "-Xmx${heap}" "-Xms${heap}" -XX:+UseG1GC \
    "-Dlog4j2.configurationFile=${run}/log4j2.properties" \
    -cp "${libs}/*" "$@"
}

start() {
  if running; then
    log "already running (pid $(cat "${pidfile}")) on 127.0.0.1:${port}"
    print_env
    return
  fi
  command -v java >/dev/null || { log "java not found"; exit 1; }
  fetch_libs
  # Checked after the (possibly long) download, as close to the launch as possible: another
  # broker may have started meanwhile (the machine is shared; use distinct KAFKA_PORTs).
  if port_open "${port}" || port_open "${cport}"; then
    log "port ${port} or ${cport} is taken by another process; set KAFKA_PORT"
    exit 1
  fi
  if [[ ${security} == 1 ]] && { port_open "${sasl_port}" || port_open "${mtls_port}"; }; then
    log "port ${sasl_port} or ${mtls_port} (KAFKA_SECURITY=1) is taken by another process; set KAFKA_PORT"
    exit 1
  fi
  local t0=${SECONDS}
  # The data of a previous run is kept only when asked, and only when it is whole: a formatted
  # log directory (meta.properties) and, with KAFKA_SECURITY=1, the certificates it was
  # started with.
  if [[ ${keep_data} == 1 && -f "${run}/data/meta.properties" ]] &&
    { [[ ${security} != 1 ]] || [[ -f "${secdir}/env" ]]; }; then
    log "keeping the data of the last run in ${run}/data"
    if [[ -f "${logfile}" ]]; then
      mv -f "${logfile}" "${logfile}.1"
    fi
    write_config
  else
    rm -rf "${run}"
    local scram=()
    if [[ ${security} == 1 ]]; then
      mkdir -p "${run}"
      gen_security
      local pw
      pw="$(cat "${secdir}/sasl-password")"
      scram=(--add-scram "SCRAM-SHA-256=[name=outlierd,password=${pw}]"
        --add-scram "SCRAM-SHA-512=[name=outlierd,password=${pw}]")
    fi
    write_config
    local uuid
    uuid="$(java_cmd kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
    java_cmd kafka.tools.StorageTool format -t "${uuid}" -c "${run}/server.properties" "${scram[@]}" \
      >"${run}/format.log" 2>&1 || { cat "${run}/format.log" >&2; log "storage format failed"; exit 1; }
  fi
  # setsid: the broker outlives this script and the test process that started it.
  setsid java "-Xmx${heap}" "-Xms${heap}" -XX:+UseG1GC \
    "-Dlog4j2.configurationFile=${run}/log4j2.properties" \
    -cp "${libs}/*" kafka.Kafka "${run}/server.properties" \
    >"${run}/stdout.log" 2>&1 </dev/null &
  echo $! >"${pidfile}"
  local deadline=$((SECONDS + startwait))
  # Ready = the client port accepts connections and the broker logged that it finished starting
  # (the port opens a moment before the metadata is loaded and requests are served).
  until port_open "${port}" && grep -q "Kafka Server started" "${logfile}" 2>/dev/null; do
    if ! running; then
      tail -n 40 "${logfile}" "${run}/stdout.log" >&2 2>/dev/null || true
      log "broker exited during start"
      rm -f "${pidfile}"
      exit 1
    fi
    if ((SECONDS >= deadline)); then
      tail -n 40 "${logfile}" "${run}/stdout.log" >&2 2>/dev/null || true
      log "broker not ready after ${startwait} s; stopping it"
      stop
      exit 1
    fi
    sleep 0.5
  done
  local extra=""
  if [[ ${security} == 1 ]]; then
    extra=", SASL_SSL on ${sasl_port}, MTLS on ${mtls_port}"
  fi
  log "Apache Kafka ${version} ready on 127.0.0.1:${port}${extra} in $((SECONDS - t0)) s (pid $(cat "${pidfile}"), log ${logfile})"
  print_env
}

stop() {
  if ! running; then
    rm -f "${pidfile}"
    log "not running"
    return
  fi
  local pid
  pid="$(cat "${pidfile}")"
  kill -TERM "${pid}"
  local deadline=$((SECONDS + 60))
  while kill -0 "${pid}" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "no clean shutdown after 60 s; killing pid ${pid}"
      kill -KILL "${pid}" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "${pidfile}"
  log "stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
restart)
  stop
  keep_data=1
  start
  ;;
status)
  if running; then
    echo "running: Apache Kafka ${version}, pid $(cat "${pidfile}"), 127.0.0.1:${port}"
  else
    echo "not running"
    exit 3
  fi
  ;;
env) print_env ;;
*)
  echo "usage: $0 {start|stop|restart|status|env}" >&2
  exit 2
  ;;
esac
