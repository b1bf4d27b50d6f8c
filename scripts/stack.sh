#!/bin/bash
# stack.sh: bring a whole private sandbox stack up or down in one directory.
#
#   stack.sh up DIR PORT     PostgreSQL cluster, migrations, TLS cert, nginx
#                            on 127.0.0.1:PORT, sandbox-api, supervisor;
#                            writes DIR/dev.env (SANDBOX_URL, SANDBOX_API_KEY)
#   stack.sh down DIR        stop everything it started, by pid
#   stack.sh pg-stop DIR     stop only PostgreSQL (outage tests)
#   stack.sh pg-start DIR    start only PostgreSQL
#
# Used by `make run` (DIR=var, PORT=8443) and by the test suite (a
# temporary DIR on free ports). Idempotent: `up` on a running stack starts
# only what is missing. Needs root (it creates the `sandbox` user, runs
# PostgreSQL as `postgres`, nginx workers and the api as `sandbox`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
BIN="$ROOT/$BUILD"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)

die() { echo "stack: $*" >&2; exit 1; }
say() { [ -n "${STACK_QUIET:-}" ] || echo "stack: $*" >&2; }

alive() { # pidfile; a zombie (dead, not yet reaped) is not alive
	local pid
	[ -f "$1" ] || return 1
	pid=$(cat "$1")
	kill -0 "$pid" 2>/dev/null || return 1
	[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

ensure_user() {
	id sandbox >/dev/null 2>&1 ||
		useradd --system --user-group --no-create-home \
			--home-dir /nonexistent --shell /usr/sbin/nologin sandbox
	id postgres >/dev/null 2>&1 || die "no postgres user (is postgresql installed?)"
}

pg_start() {
	local dir=$1
	if runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/pg/data" status >/dev/null 2>&1; then
		return 0
	fi
	runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/pg/data" -l "$dir/logs/postgres.log" \
		-o "-c listen_addresses='' -c unix_socket_directories='$dir/run/pg' -c port=5432" \
		-w -t 30 start >/dev/null
}

pg_stop() {
	local dir=$1
	[ -d "$dir/pg/data" ] || return 0
	runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/pg/data" -m fast -w stop >/dev/null 2>&1 || true
}

# One key of the effective configuration (sandbox-api -n).
conf_key() {
	"$BIN/sandbox-api" -n | awk -F' = ' -v k="SANDBOX_$1" '$1==k{print $2}'
}

render() { # template output
	sed -e "s|@PREFIX@|$DIR/nginx|g" -e "s|@LOG_DIR@|$DIR/logs|g" \
	    -e "s|@LISTEN@|127.0.0.1:$PORT|g" -e "s|@TLS_CERT@|$DIR/tls/cert.pem|g" \
	    -e "s|@TLS_KEY@|$DIR/tls/key.pem|g" -e "s|@WWW_ROOT@|$ROOT/www|g" \
	    -e "s|@API_SOCKET@|$DIR/run/api.sock|g" -e "s|@NGINX_USER@|sandbox sandbox|g" \
	    -e "s|@SUPERVISOR_SOCKET@|$DIR/run/supervisor.sock|g" \
	    -e "s|@MAX_UPLOAD_MB@|$MAX_UPLOAD_MB|g" -e "s|@DATA_ROOT@|$DIR/data|g" \
	    -e "s|@RATE_LIMIT_RPS@|$(conf_key RATE_LIMIT_RPS)|g" \
	    -e "s|@RATE_LIMIT_BURST@|$(conf_key RATE_LIMIT_BURST)|g" \
	    -e "s|@MAX_UPLOAD_BYTES@|$((MAX_UPLOAD_MB * 1048576))|g" "$1" |
		awk -v allow="$(conf_key METRICS_ALLOW)" '$1 == "@METRICS_ALLOW@" {
			n = split(allow, a, ","); for (i = 1; i <= n; i++) printf "    %s 1;\n", a[i]
			next } { print }' > "$2"
}

# A private dockerd for the docker runtime (STACK_DOCKER=1): its own data
# root, exec root, socket and containerd namespace, and no networking of
# its own (no bridge, no iptables): containers get network "none".
docker_up() {
	command -v dockerd >/dev/null 2>&1 || die "STACK_DOCKER=1 needs dockerd (docker.io)"
	local sock="$DIR/run/docker.sock" ns
	ns="sandbox-$(basename "$DIR" | tr -c 'a-zA-Z0-9\n' '-')"
	mkdir -p "$DIR/docker" "$DIR/run/dx"
	if ! alive "$DIR/pids/dockerd.pid"; then
		start_daemon dockerd "$DIR/pids/dockerd.pid" dockerd \
			--bridge=none --iptables=false --ip-masq=false --ip6tables=false \
			--data-root "$DIR/docker" --exec-root "$DIR/run/dx" \
			--host "unix://$sock" --pidfile "$DIR/run/dockerd.pid" \
			--containerd-namespace "$ns" --containerd-plugins-namespace "$ns-plugins" \
			--log-level warn
	fi
	for _ in $(seq 1 300); do
		[ -S "$sock" ] && curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	die "dockerd did not come up (see $DIR/logs/dockerd.log)"
}

start_daemon() { # name pidfile cmd...
	local name=$1 pidfile=$2
	shift 2
	if alive "$pidfile"; then
		return 0
	fi
	setsid "$@" >>"$DIR/logs/$name.log" 2>&1 < /dev/null &
	echo $! > "$pidfile"
}

wait_ready() {
	local url=$1 i
	for i in $(seq 1 150); do
		if curl -sk -o /dev/null -w '%{http_code}' "$url/api/v1/sandbox/readyz" | grep -q 200; then
			return 0
		fi
		sleep 0.2
	done
	curl -sk "$url/api/v1/sandbox/readyz" >&2 || true
	return 1
}

cmd_up() {
	DIR=$1
	PORT=$2
	[ "$(id -u)" = 0 ] || die "must run as root"
	for b in sandbox-api sandbox-supervisor sandboxctl sandbox-init; do
		[ -x "$BIN/$b" ] || die "$BIN/$b missing: run make first"
	done
	ensure_user
	bash "$ROOT/scripts/images.sh" "${IMAGES_DIR:-$ROOT/images}"
	mkdir -p "$DIR"/{logs,run,tls,data,nginx/tmp,pids,pg}
	chmod 0755 "$DIR" "$DIR/run"
	chmod 0750 "$DIR/logs"

	# PostgreSQL: a private cluster, reachable only through a socket in a
	# directory that only postgres and the sandbox group may enter.
	touch "$DIR/logs/postgres.log"
	chown postgres "$DIR/logs/postgres.log"
	chmod 0711 "$DIR/logs"
	if [ ! -f "$DIR/pg/data/PG_VERSION" ]; then
		say "initialising PostgreSQL cluster in $DIR/pg"
		chown postgres:postgres "$DIR/pg"
		runuser -u postgres -- "$PGBIN/initdb" -D "$DIR/pg/data" -U postgres \
			-A trust -E UTF8 --locale=C.UTF-8 --no-instructions >/dev/null
	fi
	mkdir -p "$DIR/run/pg"
	chown postgres:sandbox "$DIR/run/pg"
	chmod 0750 "$DIR/run/pg"
	pg_start "$DIR"
	local psql=("$PGBIN/psql" -X -q -h "$DIR/run/pg" -U postgres -d postgres -v ON_ERROR_STOP=1)
	if [ -z "$("${psql[@]}" -tAc "SELECT 1 FROM pg_roles WHERE rolname='sandbox'")" ]; then
		"${psql[@]}" -c "CREATE ROLE sandbox LOGIN"
		"${psql[@]}" -c "CREATE DATABASE sandbox OWNER sandbox"
	fi

	# Configuration: one file, generated once, kept across restarts.
	local conf="$DIR/sandbox.conf"
	if [ ! -f "$conf" ]; then
		umask 077
		cat > "$conf" <<CONF
# Generated by scripts/stack.sh for a private stack. Any SANDBOX_* key of
# docs/configuration.md may be added; the environment overrides this file.
SANDBOX_DATABASE_URL = host=$DIR/run/pg port=5432 dbname=sandbox user=sandbox
SANDBOX_DATA_ROOT = $DIR/data
SANDBOX_IMAGES_DIR = ${IMAGES_DIR:-$ROOT/images}
SANDBOX_API_SOCKET = $DIR/run/api.sock
SANDBOX_SUPERVISOR_SOCKET = $DIR/run/supervisor.sock
SANDBOX_INIT_PATH = $BIN/sandbox-init
SANDBOX_PUBLIC_URL = https://127.0.0.1:$PORT
SANDBOX_WS_SIGNING_SECRET = $(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# Browsers cannot send headers on a WebSocket: the panel needs signed URLs.
SANDBOX_WS_SIGNED_URLS = true
SANDBOX_API_WORKERS = 4
SANDBOX_HEARTBEAT_SEC = 2
SANDBOX_NODE_STALE_SEC = 10
CONF
		if [ "${STACK_DOCKER:-0}" = 1 ]; then
			printf 'SANDBOX_DOCKER_HOST = %s\n' "$DIR/run/docker.sock" >> "$conf"
		fi
		if [ -n "${STACK_EXTRA_CONF:-}" ]; then
			printf '%s\n' "$STACK_EXTRA_CONF" >> "$conf"
		fi
		umask 022
		chgrp sandbox "$conf"
		chmod 0640 "$conf"
	fi
	export SANDBOX_CONFIG_FILE="$conf"
	MAX_UPLOAD_MB=$("$BIN/sandbox-api" -n | awk -F' = ' '$1=="SANDBOX_MAX_UPLOAD_MB"{print $2}')

	"$BIN/sandboxctl" migrate "$ROOT/sql" >/dev/null

	# TLS: a private CA (tls/ca.pem, what clients trust) and a server
	# certificate it signs for 127.0.0.1 and localhost.
	if [ ! -f "$DIR/tls/cert.pem" ]; then
		(
			cd "$DIR/tls"
			umask 077
			openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
				-days 825 -subj "/CN=sandbox local CA" \
				-addext "basicConstraints=critical,CA:TRUE" \
				-addext "keyUsage=critical,keyCertSign,cRLSign" \
				-keyout ca-key.pem -out ca.pem 2>/dev/null
			openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
				-subj "/CN=localhost" -keyout key.pem -out server.csr 2>/dev/null
			printf '%s\n' "basicConstraints=critical,CA:FALSE" \
				"keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" \
				"subjectAltName=IP:127.0.0.1,DNS:localhost" > server.ext
			openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
				-days 825 -extfile server.ext -out cert.pem 2>/dev/null
			rm -f server.csr server.ext ca.srl
			chmod 0644 ca.pem cert.pem
		)
	fi

	[ "${STACK_DOCKER:-0}" = 1 ] && docker_up
	start_daemon api "$DIR/pids/api.pid" "$BIN/sandbox-api"
	start_daemon supervisor "$DIR/pids/supervisor.pid" "$BIN/sandbox-supervisor"

	render "$ROOT/nginx/sandbox.conf.in" "$DIR/nginx/sandbox.conf"
	render "$ROOT/nginx/nginx-dev.conf.in" "$DIR/nginx/nginx.conf"
	if alive "$DIR/nginx/nginx.pid"; then
		nginx -e "$DIR/logs/nginx-error.log" -c "$DIR/nginx/nginx.conf" -s reload
	else
		nginx -e "$DIR/logs/nginx-error.log" -c "$DIR/nginx/nginx.conf"
	fi
	cp "$DIR/nginx/nginx.pid" "$DIR/pids/nginx.pid" 2>/dev/null || true

	# The first admin key, created once.
	local envfile="$DIR/dev.env"
	if [ ! -f "$envfile" ]; then
		local key
		key=$("$BIN/sandboxctl" key create --user admin --admin --label bootstrap 2>/dev/null)
		umask 077
		printf 'SANDBOX_URL=https://127.0.0.1:%s\nSANDBOX_API_KEY=%s\n' "$PORT" "$key" > "$envfile"
		umask 022
	fi
	wait_ready "https://127.0.0.1:$PORT" || die "the stack did not become ready; see $DIR/logs/"
}

stop_pidfile() {
	local pidfile=$1 pid i
	[ -f "$pidfile" ] || return 0
	pid=$(cat "$pidfile")
	if alive "$pidfile"; then
		kill -TERM "$pid" 2>/dev/null || true
		# The supervisor ends its sandboxes first: give it time.
		for i in $(seq 1 200); do
			alive "$pidfile" || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
}

cmd_down() {
	DIR=$1
	[ -d "$DIR" ] || return 0
	[ -f "$DIR/nginx/nginx.pid" ] && cp "$DIR/nginx/nginx.pid" "$DIR/pids/nginx.pid"
	stop_pidfile "$DIR/pids/nginx.pid"
	stop_pidfile "$DIR/pids/api.pid"
	stop_pidfile "$DIR/pids/supervisor.pid"
	stop_pidfile "$DIR/pids/dockerd.pid"
	# Whatever a killed supervisor could not clean: containers, mounts.
	if [ -d "$DIR/data/oci-state" ]; then
		for c in $(crun --root "$DIR/data/oci-state" list -q 2>/dev/null); do
			crun --root "$DIR/data/oci-state" delete --force "$c" >/dev/null 2>&1 || true
		done
	fi
	# Session workspaces outlive a supervisor restart, not the stack.
	grep -oE " $DIR/data/(runs/[^ ]*/workspace|sessions/[^ ]*) " /proc/self/mountinfo 2>/dev/null |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done || true
	pg_stop "$DIR"
}

case "${1:-}" in
up)       [ $# = 3 ] || die "usage: stack.sh up DIR PORT"; cmd_up "$(realpath -m "$2")" "$3" ;;
down)     [ $# = 2 ] || die "usage: stack.sh down DIR"; cmd_down "$(realpath -m "$2")" ;;
pg-stop)  pg_stop "$(realpath -m "$2")" ;;
pg-start) DIR=$(realpath -m "$2"); pg_start "$DIR" ;;
*)        die "usage: stack.sh up DIR PORT | down DIR | pg-stop DIR | pg-start DIR" ;;
esac
