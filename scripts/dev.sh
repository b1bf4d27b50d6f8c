#!/bin/sh
# dev.sh: `make run` / `make stop` — the whole service in ./var on
# https://127.0.0.1:${HTTPS_PORT:-8443}.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${HTTPS_PORT:-8443}
case "${1:-up}" in
up)
	bash "$ROOT/scripts/stack.sh" up "$ROOT/var" "$PORT"
	. "$ROOT/var/dev.env"
	echo
	echo "sandbox is running."
	echo "  web panel: $SANDBOX_URL/"
	echo "  API:       $SANDBOX_URL/api/v1/sandbox/"
	echo "  API key:   $SANDBOX_API_KEY"
	echo "  (both saved in var/dev.env; logs in var/logs/; stop with 'make stop')"
	;;
down)
	bash "$ROOT/scripts/stack.sh" down "$ROOT/var"
	echo "sandbox stopped."
	;;
*)
	echo "usage: dev.sh up|down" >&2
	exit 2
	;;
esac
