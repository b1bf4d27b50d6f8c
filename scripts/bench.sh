#!/bin/bash
# bench.sh: `make bench` — a private stack tuned for throughput, the
# benchmarks against it, everything stopped afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export BUILD=${BUILD:-build}
for v in $(env | grep -o '^SANDBOX_[A-Z0-9_]*' || true); do unset "$v"; done
sh scripts/deps.sh
make -s -j2 all
STACK=$(mktemp -d /tmp/sandbox-bench.XXXXXX)
GV=$(mktemp -d /tmp/sandbox-bench-runsc.XXXXXX)
trap 'STACK_QUIET=1 bash scripts/stack.sh down "$STACK"; STACK_QUIET=1 bash scripts/stack.sh down "$GV"; rm -rf "$STACK" "$GV"' EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
export STACK_EXTRA_CONF="SANDBOX_USER_MAX_CONCURRENT_RUNS = 8
SANDBOX_QUEUE_MAX_LENGTH = 1000
SANDBOX_LOG_LEVEL = warn
SANDBOX_RATE_LIMIT_RPS = 1000000
SANDBOX_RATE_LIMIT_BURST = 1000000
SANDBOX_USER_MAX_QUEUED_RUNS = 1000"
STACK_DOCKER=1 STACK_QUIET=1 bash scripts/stack.sh up "$STACK" "$PORT"
TEST_STACK_DIR="$STACK" /usr/bin/python3 tests/bench/bench_runs.py
TEST_STACK_DIR="$STACK" /usr/bin/python3 tests/bench/bench_streams.py
(cd tests/bench && TEST_STACK_DIR="$STACK" /usr/bin/python3 bench_docker.py)
# The `oci` runtime on gVisor: the same latency cases on a stack of its
# own, beside bare `runsc run` (no saturation figure).
STACK_DOCKER=0 STACK_QUIET=1 STACK_EXTRA_CONF="$STACK_EXTRA_CONF
SANDBOX_OCI_RUNTIME = runsc" bash scripts/stack.sh up "$GV" "$(free_port)"
echo
BENCH_OCI=runsc BENCH_N=${BENCH_RUNSC_N:-20} TEST_STACK_DIR="$GV" /usr/bin/python3 tests/bench/bench_runs.py
