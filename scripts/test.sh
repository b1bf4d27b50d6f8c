#!/bin/bash
# test.sh: the whole suite (`make test`; `make check` with BUILD=build-san
# SAN=1). Builds, runs the C unit tests (TAP), starts a private stack in a
# temporary directory on free ports, runs the integration suite through
# nginx, and stops everything whatever happened. Exit status: non-zero on
# any failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export BUILD=${BUILD:-build}
SAN=${SAN:-}

# The suite must not inherit an operator's SANDBOX_* settings.
for v in $(env | grep -o '^SANDBOX_[A-Z0-9_]*' || true); do unset "$v"; done

sh scripts/deps.sh
make -s -j2 BUILD="$BUILD" SAN="$SAN" all

echo "== unit tests (TAP)"
prove --nocolor "$BUILD"/tests/test_*

echo "== fuzz smoke (libFuzzer, 5 s per target; longer: make fuzz)"
make -s BUILD="$BUILD" fuzz FUZZ_SECONDS=5

STACK=$(mktemp -d /tmp/sandbox-test.XXXXXX)
cleanup() {
	STACK_QUIET=1 bash scripts/stack.sh down "$STACK" || true
	if [ -n "${KEEP_STACK:-}" ]; then
		echo "stack kept in $STACK"
	else
		rm -rf "$STACK"
	fi
}
trap cleanup EXIT
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

echo "== integration tests (stack in $STACK, port $PORT)"
if [ "$SAN" = 1 ]; then
	# Leaks are reported by LeakSanitizer at exit; libfcgi keeps a few
	# process-lifetime allocations that are not leaks.
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi
# Limits small enough that the suite can hit them quickly.
export STACK_EXTRA_CONF="SANDBOX_QUEUE_MAX_LENGTH = 6
SANDBOX_USER_MAX_CONCURRENT_RUNS = 4
SANDBOX_CANCEL_GRACE_SECONDS = 2
SANDBOX_WORKSPACE_CAP_MB = 64
SANDBOX_MAX_LOG_BYTES = 1048576
SANDBOX_WS_SIGNED_URL_TTL_SEC = 60
SANDBOX_WS_REPLAY_MAX_FRAMES = 50
SANDBOX_MAX_UPLOAD_MB = 48
SANDBOX_USER_MAX_SESSIONS = 6
SANDBOX_MAX_ARTIFACT_BYTES_PER_RUN_MB = 4
SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB = 8
SANDBOX_REAPER_INTERVAL_SEC = 5
SANDBOX_SESSION_SWEEP_SEC = 1
SANDBOX_RUNTIME_PROBE_SEC = 5
SANDBOX_METRICS_TOKEN = test-metrics-token-0123456789
SANDBOX_RATE_LIMIT_RPS = 1000
SANDBOX_RATE_LIMIT_BURST = 2000"
# The stack runs its own dockerd too: the docker runtime is tested.
STACK_DOCKER=1 bash scripts/stack.sh up "$STACK" "$PORT"
# The browser tests' two npm packages (pinned in tests/web/package-lock.json).
if [ ! -d tests/web/node_modules/playwright-core ] || [ tests/web/package-lock.json -nt tests/web/node_modules ]; then
	(cd tests/web && npm ci --no-audit --no-fund --loglevel=error) >/dev/null
fi
export TEST_STACK_DIR="$STACK" TEST_ROOT="$ROOT" TEST_BUILD="$ROOT/$BUILD"
/usr/bin/python3 -m pytest -p no:cacheprovider -q tests/integration "$@"
if [ $# = 0 ]; then
	# Parity: the runtime-independent suite again, every run and session
	# on the docker runtime, with the same assertions.
	echo "== the runtime-independent suite on the docker runtime"
	TEST_RUNTIME=docker /usr/bin/python3 -m pytest -p no:cacheprovider -q \
		tests/integration/test_runs.py tests/integration/test_sessions.py \
		tests/integration/test_files.py tests/integration/test_artifacts.py \
		tests/integration/test_streams.py tests/integration/test_isolation.py \
		tests/integration/test_docker.py
fi

if [ "$SAN" = 1 ]; then
	# A sanitizer report anywhere in the server logs fails the suite.
	if grep -l -E 'runtime error:|AddressSanitizer|UndefinedBehaviorSanitizer' "$STACK"/logs/*.log; then
		echo "sanitizer reports found in the server logs" >&2
		exit 1
	fi
fi
