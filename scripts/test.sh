#!/usr/bin/env bash
# Runs hookd's whole test suite on a fresh machine.
#
# 1. A Python venv (.venv) with the reference libraries from scripts/python-requirements.txt,
#    which the cross-check tests run as code we did not write (HOOKD_TEST_PYTHON points at it),
#    and moto_server, the AWS-shaped server the SQS/SNS/S3 destination tests start on a free
#    port (HOOKD_TEST_MOTO points at it; with HOOKD_TEST_REQUIRE_MOTO=1 a moto_server that
#    cannot start stops the run here).
# 2. The Node example receiver's packages (examples/receivers/node), the official Svix
#    JavaScript SDK whose models the field check reads (scripts/crosscheck/svix-js) and the
#    providers' signing libraries the ingest tests sign with (scripts/crosscheck/providers-js),
#    each from its committed package-lock.json, when npm is here and they are missing or older
#    than the lockfile; the Node tests say they are skipped without Node
#    (HOOKD_TEST_REQUIRE_NODE=1 makes that a failure).
# 3. cargo test over the whole workspace.
#
# PostgreSQL tests run when HOOKD_TEST_POSTGRES_URL is set (a server URL whose user may create
# databases), and the outbox-source tests on MySQL/MariaDB when HOOKD_TEST_MYSQL_URL is
# (mysql://root@127.0.0.1:3306/test), the RabbitMQ destination tests when
# HOOKD_TEST_RABBITMQ_URL is (amqp://guest:guest@127.0.0.1:5672/%2f) and the NATS JetStream
# ones when HOOKD_TEST_NATS_URL is (nats://127.0.0.1:4222, JetStream enabled); otherwise they
# print that they are skipped. .ci/run sets all four and requires them. The Kafka destination
# tests need no service (librdkafka's mock cluster runs inside them).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r scripts/python-requirements.txt
export HOOKD_TEST_PYTHON="$PWD/$venv/bin/python"
export HOOKD_TEST_MOTO="$PWD/$venv/bin/moto_server"

# Starts moto_server on a free loopback port and stops it once it listens; fails if it never does.
moto_starts() {
    local port pid
    port=$("$HOOKD_TEST_PYTHON" -c \
        'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$HOOKD_TEST_MOTO" -H 127.0.0.1 -p "$port" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            kill "$pid"
            wait "$pid" 2>/dev/null || true
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.5
    done
    kill "$pid"
    return 1
}
if [ "${HOOKD_TEST_REQUIRE_MOTO:-}" = 1 ] && ! moto_starts; then
    echo "FATAL: $HOOKD_TEST_MOTO cannot start; the AWS destination tests need it." >&2
    exit 1
fi

for node_dir in examples/receivers/node scripts/crosscheck/svix-js scripts/crosscheck/providers-js; do
    if command -v npm >/dev/null && \
        [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
        npm ci --prefix "$node_dir" --no-audit --no-fund --silent
    fi
done

cargo test --workspace "$@"
