#!/usr/bin/env bash
# Installs and runs the real Apache Kafka broker that samzapy's integration tests and CI talk to:
# one KRaft node that is both broker and controller, on 127.0.0.1, from jars fetched off Maven Central.
#
#   scripts/kafka.sh fetch    download the broker's jars into the cache (quick when already there)
#   scripts/kafka.sh up       fetch if needed, format the data dir once, start, wait until it answers
#   scripts/kafka.sh down     stop the port's broker: SIGTERM, wait up to 30 s, then SIGKILL
#   scripts/kafka.sh status   exit 0 when a broker answers on the port, 1 otherwise
#
# One broker per port, each with a data dir of its own: by default <repo>/.kafka/<port>, so
# `KAFKA_BOOTSTRAP=127.0.0.1:19092 make kafka-up` starts a second broker beside the one on 9092.
# The data dir's broker.pid records "<pid> <port>", and the script only ever stops the process it
# records for the port it was asked about; a broker of another port is left running:
#   - `up` on a port whose data dir holds a running broker of another port (one SAMZAPY_KAFKA_DIR
#     given for two ports) fails at once, naming that broker's port;
#   - `up` on a port where some other Kafka broker already answers uses it as it is (and `down`
#     will not stop it); a port, or controller port, taken by anything else fails at once;
#   - `down` and `status` on a port that is not the recorded broker's say so and touch nothing;
#   - a broker this `up` started that does not answer in KAFKA_START_TIMEOUT is stopped; one an
#     earlier `up` started is left to `down`.
# A broker.pid holding only a pid (written by an older kafka.sh) takes its port from the data
# dir's server.properties; such a broker ran from <repo>/.kafka itself: SAMZAPY_KAFKA_DIR=.kafka
# scripts/kafka.sh down stops it.
#
# Environment (all optional):
#   KAFKA_BOOTSTRAP        the broker's address, 127.0.0.1:<port> (127.0.0.1:9092): the same
#                          variable the example jobs in configs/ read, so one setting moves both
#   KAFKA_PORT             client listener port; overrides KAFKA_BOOTSTRAP's (the test suite's)
#   KAFKA_CONTROLLER_PORT  KRaft controller listener port (the port + 1)
#   SAMZAPY_KAFKA_DIR      data dir: server.properties, logs/, broker.log, broker.pid
#                          (<repo>/.kafka/<port>)
#   SAMZAPY_CACHE          jar cache; jars go to $SAMZAPY_CACHE/kafka-<version>/lib (~/.cache/samzapy)
#   KAFKA_VERSION          Kafka version to fetch (default: <kafka.version> in kafka/pom.xml)
#   KAFKA_HEAP_OPTS        JVM heap flags (-Xmx512m -Xms256m)
#   KAFKA_OPTS             extra JVM flags
#   KAFKA_LOG_LEVEL        broker log level: trace, debug, info, warn, error (info)
#   KAFKA_START_TIMEOUT    seconds `up` waits for the broker to answer (60)
#   KAFKA_OWNER_PID        when set, the broker is stopped once this process exits (test sessions)
#
# Topics are never created on first use (auto.create.topics.enable=false): a test must create the
# topics it uses, as a production job's operator would.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/kafka/pom.xml"

die() {
    echo "kafka.sh: $*" >&2
    exit 1
}
say() { echo "kafka.sh: $*"; }

pom_version() {
    sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n 1
}

KAFKA_VERSION="${KAFKA_VERSION:-$(pom_version)}"
[[ -n "$KAFKA_VERSION" ]] || die "no <kafka.version> found in $POM"
CACHE="${SAMZAPY_CACHE:-$HOME/.cache/samzapy}"
LIB="$CACHE/kafka-$KAFKA_VERSION/lib"
# The port: KAFKA_PORT, else the one in KAFKA_BOOTSTRAP, else 9092.
bootstrap_port() {
    local address="${KAFKA_BOOTSTRAP:-127.0.0.1:9092}" port
    port="${address##*:}"
    case "${address%:*}" in
    127.0.0.1 | localhost) ;;
    *) die "KAFKA_BOOTSTRAP=$address: the local broker listens on 127.0.0.1; set KAFKA_BOOTSTRAP=127.0.0.1:<port>" ;;
    esac
    [[ "$port" =~ ^[0-9]+$ ]] || die "KAFKA_BOOTSTRAP=$address: expected 127.0.0.1:<port>"
    echo "$port"
}
# Hints name KAFKA_BOOTSTRAP, the variable the example jobs read, to move the broker.
MOVE_HINT="choose another port with KAFKA_BOOTSTRAP=127.0.0.1:<port>"
if [[ -z "${KAFKA_PORT:-}" ]]; then
    KAFKA_PORT="$(bootstrap_port)"
else
    [[ "$KAFKA_PORT" =~ ^[0-9]+$ ]] || die "KAFKA_PORT=$KAFKA_PORT: expected a port number"
    MOVE_HINT="$MOVE_HINT (KAFKA_PORT=$KAFKA_PORT is set too and wins: change or unset it)"
fi
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
# Per port by default, so that brokers on two ports never share a data dir or a pid file.
DATA="${SAMZAPY_KAFKA_DIR:-$ROOT/.kafka/$KAFKA_PORT}"
[[ "$DATA" == /* ]] || DATA="$PWD/$DATA" # server.properties needs an absolute path
PID_FILE="$DATA/broker.pid"
LOG_FILE="$DATA/broker.log"
PROPS="$DATA/server.properties"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

# --- fetch -------------------------------------------------------------------------------------

# The jars land in a temporary directory first, and a marker is written last, so an interrupted
# download is never mistaken for a complete one and two concurrent fetches do not mix their files.
fetch() {
    if [[ -f "$LIB/.complete" ]]; then
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: install Apache Maven to fetch Kafka $KAFKA_VERSION"
    local tmp="$LIB.tmp.$$"
    rm -rf "$tmp"
    say "fetching Kafka $KAFKA_VERSION from Maven Central into $LIB"
    mkdir -p "$(dirname "$LIB")"
    local mvn_log="$tmp.log"
    if ! mvn -q -B -f "$POM" dependency:copy-dependencies \
        -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$tmp" >"$mvn_log" 2>&1; then
        cat "$mvn_log" >&2
        rm -rf "$tmp"
        die "Maven could not fetch Kafka $KAFKA_VERSION (its output is above and in $mvn_log)"
    fi
    rm -f "$mvn_log"
    [[ -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" ]] ||
        die "Maven finished but $tmp/kafka_2.13-$KAFKA_VERSION.jar is missing"
    touch "$tmp/.complete"
    if [[ -d "$LIB" && ! -f "$LIB/.complete" ]]; then
        rm -rf "$LIB" # an interrupted earlier attempt
    fi
    mv -T "$tmp" "$LIB" 2>/dev/null || rm -rf "$tmp" # lost a race with another fetch: keep theirs
    [[ -f "$LIB/.complete" ]] || die "fetch did not leave a complete $LIB"
    say "Kafka $KAFKA_VERSION jars ready in $LIB ($(du -sh "$LIB" | cut -f1))"
}

# --- probes ------------------------------------------------------------------------------------

# 0 when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# 0 when a Kafka broker on 127.0.0.1:$1 answers an ApiVersions v0 request (correlation id 42)
# with error code 0. Plain bash, so no JVM start-up per probe and no Python needed.
kafka_answers() {
    local reply
    reply="$(timeout 3 bash -c "
        exec 3<>/dev/tcp/127.0.0.1/$1 || exit 1
        printf '\x00\x00\x00\x0f\x00\x12\x00\x00\x00\x00\x00\x2a\x00\x05probe' >&3
        head -c 10 <&3 | od -An -tx1 | tr -d ' \n'
    " 2>/dev/null)" || return 1
    # size (4 bytes) | correlation id = 42 | error code = 0
    [[ "${reply:8:12}" == "0000002a0000" ]]
}

# Reads $DATA/broker.pid. When it names a live Kafka broker started from $DATA, sets REC_PID and
# REC_PORT (the client port it was started for) and returns 0; otherwise returns 1.
recorded() {
    local pid port args
    REC_PID="" REC_PORT=""
    [[ -f "$PID_FILE" ]] || return 1
    read -r pid port _ <"$PID_FILE" || [[ -n "${pid:-}" ]] || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    # A pid is only ours if it still runs kafka.Kafka on this data dir's server.properties (its
    # last argument): pids are reused after a crash or reboot.
    mapfile -d "" args 2>/dev/null <"/proc/$pid/cmdline" || return 1
    ((${#args[@]} >= 2)) && [[ "${args[-2]}" == kafka.Kafka && "${args[-1]}" -ef "$PROPS" ]] ||
        return 1
    if [[ ! "${port:-}" =~ ^[0-9]+$ ]]; then # a pid file of an older kafka.sh: pid only
        port="$(sed -n 's|^listeners=PLAINTEXT://[^,]*:\([0-9]*\).*|\1|p' "$PROPS")"
        [[ -n "$port" ]] || return 1
    fi
    REC_PID=$pid REC_PORT=$port
}

# 0 while process $1 runs. An exited broker stays a zombie until init reaps it, which some
# container inits do only every second or so: a zombie counts as stopped.
alive() {
    local state
    state="$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)" || return 1
    [[ -n "$state" && "$state" != "Z" ]]
}

log_tail() {
    if [[ -f "$LOG_FILE" ]]; then
        echo "--- last 40 lines of $LOG_FILE ---" >&2
        tail -n 40 "$LOG_FILE" >&2
        echo "---" >&2
    fi
}

# --- up ----------------------------------------------------------------------------------------

write_properties() {
    cat >"$PROPS" <<EOF
# Written by scripts/kafka.sh up; rewritten on every start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DATA/logs

# One node: every internal topic has one replica, and one partition keeps its creation quick.
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1

# Tests create their topics; a typo must fail instead of creating a topic.
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0

# Small and quick: 2 cores, 512 MB heap, short-lived data.
num.network.threads=2
num.io.threads=2
log.segment.bytes=16777216
log.cleaner.dedupe.buffer.size=16777216
log.cleaner.backoff.ms=1000
EOF
}

format_once() {
    if [[ -f "$DATA/logs/meta.properties" ]]; then
        return 0
    fi
    local cluster_id
    cluster_id="$("$JAVA" -cp "$LIB/*" kafka.tools.StorageTool random-uuid 2>>"$LOG_FILE")" ||
        { log_tail; die "kafka.tools.StorageTool random-uuid failed"; }
    say "formatting $DATA/logs (cluster id $cluster_id)"
    "$JAVA" -cp "$LIB/*" kafka.tools.StorageTool format --ignore-formatted \
        -t "$cluster_id" -c "$PROPS" >>"$LOG_FILE" 2>&1 ||
        { log_tail; die "kafka.tools.StorageTool format failed for $DATA/logs"; }
}

up() {
    local pid started=""
    if recorded; then
        if [[ "$REC_PORT" != "$KAFKA_PORT" ]]; then
            die "$DATA is the data dir of broker $REC_PID on 127.0.0.1:$REC_PORT, which is left" \
                "running; give the broker for 127.0.0.1:$KAFKA_PORT a data dir of its own" \
                "(unset SAMZAPY_KAFKA_DIR for <repo>/.kafka/$KAFKA_PORT, or set another one)"
        fi
        pid=$REC_PID
        if kafka_answers "$KAFKA_PORT"; then
            say "broker $pid (from $PID_FILE) already answers on 127.0.0.1:$KAFKA_PORT"
            return 0
        fi
        say "broker $pid (from $PID_FILE) is running but not answering yet; waiting for it"
    else
        rm -f "$PID_FILE" # stale: its process is gone, or is no broker of this data dir
        if port_open "$KAFKA_PORT"; then
            # Someone else's listener: never waited on, never stopped.
            if kafka_answers "$KAFKA_PORT"; then
                say "a Kafka broker not started from $DATA already answers on" \
                    "127.0.0.1:$KAFKA_PORT; using it (\`down\` leaves it running)"
                return 0
            fi
            die "127.0.0.1:$KAFKA_PORT is taken by a process that is not a Kafka broker; $MOVE_HINT"
        fi
        if port_open "$KAFKA_CONTROLLER_PORT"; then
            die "127.0.0.1:$KAFKA_CONTROLLER_PORT, the controller port of a broker on" \
                "127.0.0.1:$KAFKA_PORT, is taken by another process; $MOVE_HINT, or" \
                "KAFKA_CONTROLLER_PORT=<port> for the controller alone"
        fi
        command -v "$JAVA" >/dev/null || die "java not found: install Java 17+ or set JAVA_HOME"
        fetch
        mkdir -p "$DATA"
        write_properties
        if [[ -f "$LOG_FILE" ]]; then
            mv -f "$LOG_FILE" "$LOG_FILE.1"
        fi
        format_once
        # setsid: the broker leaves the caller's process group, so a Ctrl-C aimed at the caller
        # does not kill it; `down` stops it.
        # shellcheck disable=SC2086 # heap and extra options are word lists
        setsid "$JAVA" ${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m} -Djava.awt.headless=true \
            -Dorg.slf4j.simpleLogger.defaultLogLevel="${KAFKA_LOG_LEVEL:-info}" \
            -Dorg.slf4j.simpleLogger.showDateTime=true \
            -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd HH:mm:ss.SSS" \
            ${KAFKA_OPTS:-} -cp "$LIB/*" kafka.Kafka "$PROPS" \
            >>"$LOG_FILE" 2>&1 </dev/null &
        pid=$!
        echo "$pid $KAFKA_PORT" >"$PID_FILE" # the port: see the header
        say "started Kafka $KAFKA_VERSION broker $pid on 127.0.0.1:$KAFKA_PORT (log: $LOG_FILE)"
        if [[ -n "${KAFKA_OWNER_PID:-}" ]]; then
            watch_owner "$KAFKA_OWNER_PID" "$pid"
        fi
        started=1
    fi

    local deadline=$((SECONDS + ${KAFKA_START_TIMEOUT:-60}))
    until kafka_answers "$KAFKA_PORT"; do
        if ! alive "$pid"; then
            rm -f "$PID_FILE"
            log_tail
            die "broker $pid exited before answering on 127.0.0.1:$KAFKA_PORT"
        fi
        if ((SECONDS >= deadline)); then
            log_tail
            if [[ -z "$started" ]]; then
                die "broker $pid did not answer on 127.0.0.1:$KAFKA_PORT within" \
                    "${KAFKA_START_TIMEOUT:-60} s; an earlier \`up\` started it: left running" \
                    "(scripts/kafka.sh down stops it)"
            fi
            stop_pid "$pid"
            die "broker $pid did not answer on 127.0.0.1:$KAFKA_PORT within" \
                "${KAFKA_START_TIMEOUT:-60} s; stopped it"
        fi
        sleep 0.2
    done
    say "broker answers on 127.0.0.1:$KAFKA_PORT"
}

# A test session that is killed never runs `down`; so when KAFKA_OWNER_PID names the process that
# owns the broker, a detached watcher runs `down` once that process is gone.
watch_owner() {
    local owner=$1 pid=$2
    setsid bash -c '
        while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
        if kill -0 "$2" 2>/dev/null; then
            SAMZAPY_KAFKA_DIR="$3" KAFKA_PORT="$4" KAFKA_VERSION="$5" "$6" down
        fi
    ' watch-owner "$owner" "$pid" "$DATA" "$KAFKA_PORT" "$KAFKA_VERSION" "$ROOT/scripts/kafka.sh" \
        </dev/null >>"$LOG_FILE" 2>&1 &
}

# --- down --------------------------------------------------------------------------------------

stop_pid() {
    local pid=$1 deadline=$((SECONDS + 30))
    kill -TERM "$pid" 2>/dev/null || true
    while alive "$pid"; do
        if ((SECONDS >= deadline)); then
            say "broker $pid still running 30 s after SIGTERM; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    rm -f "$PID_FILE"
}

down() {
    local pid
    if ! recorded; then
        rm -f "$PID_FILE"
        if kafka_answers "$KAFKA_PORT"; then
            local legacy="" old_pid=""
            if [[ -z "${SAMZAPY_KAFKA_DIR:-}" && -f "$ROOT/.kafka/broker.pid" ]]; then
                read -r old_pid _ <"$ROOT/.kafka/broker.pid" || true
            fi
            if [[ "$old_pid" =~ ^[0-9]+$ ]] && alive "$old_pid"; then
                legacy=" (an older kafka.sh ran its broker from $ROOT/.kafka:"
                legacy+=" SAMZAPY_KAFKA_DIR=$ROOT/.kafka scripts/kafka.sh down stops it)"
            fi
            die "a broker answers on 127.0.0.1:$KAFKA_PORT but $DATA has no pid file for it;" \
                "it was not started with this SAMZAPY_KAFKA_DIR, so it is left running$legacy"
        fi
        say "no broker running from $DATA"
        return 0
    fi
    pid=$REC_PID
    if [[ "$REC_PORT" != "$KAFKA_PORT" ]]; then
        # Stopping it would stop a broker nobody asked about.
        if kafka_answers "$KAFKA_PORT"; then
            die "a broker answers on 127.0.0.1:$KAFKA_PORT, but $PID_FILE records broker $pid" \
                "of 127.0.0.1:$REC_PORT; neither is stopped"
        fi
        say "no broker of 127.0.0.1:$KAFKA_PORT runs from $DATA; its broker $pid serves" \
            "127.0.0.1:$REC_PORT and is left running"
        return 0
    fi
    say "stopping broker $pid on 127.0.0.1:$KAFKA_PORT"
    stop_pid "$pid"
    say "broker $pid stopped"
}

# --- status ------------------------------------------------------------------------------------

status() {
    if ! recorded; then
        say "no broker process recorded in $DATA"
    elif [[ "$REC_PORT" == "$KAFKA_PORT" ]]; then
        say "broker $REC_PID running from $DATA (Kafka $KAFKA_VERSION)"
    else
        say "broker $REC_PID running from $DATA serves 127.0.0.1:$REC_PORT, not $KAFKA_PORT"
    fi
    if kafka_answers "$KAFKA_PORT"; then
        say "a Kafka broker answers on 127.0.0.1:$KAFKA_PORT"
        return 0
    fi
    say "no Kafka broker answers on 127.0.0.1:$KAFKA_PORT"
    return 1
}

case "${1:-}" in
fetch) fetch ;;
up) up ;;
down) down ;;
status) status ;;
*)
    echo "usage: scripts/kafka.sh fetch|up|down|status" >&2
    exit 2
    ;;
esac
