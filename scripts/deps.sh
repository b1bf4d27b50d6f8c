#!/bin/sh
# Install the Debian packages the project needs to build, run and test.
# Idempotent and quiet when everything is already there. Needs root.
set -eu

PKGS="build-essential pkg-config ca-certificates openssl
libfcgi-dev libpq-dev libjson-c-dev libarchive-dev libcurl4-openssl-dev
libmagic-dev libssl-dev libseccomp-dev libwslay-dev clang libclang-rt-14-dev
postgresql postgresql-client nginx-core crun runc runsc docker.io mmdebstrap
python3 python3-pytest python3-requests python3-websockets python3-yaml
systemd iproute2 procps psmisc curl
prometheus chromium"
# (prometheus: its promtool checks the /metrics output in the suite; its
# service is never started. chromium: the panel's browser tests. docker.io:
# the docker runtime, on a private dockerd the stack starts itself. runc and
# runsc: the `oci` runtime's other two binaries, tested beside crun.)

# Node.js for the browser tests (playwright-core): any node >= 18 will do,
# Debian's or one already installed from elsewhere.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "deps: installing$missing" >&2
# Package scripts must not start the distribution's own nginx/PostgreSQL
# services: the project runs private instances on its own ports.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' > "$policy"
	chmod 755 "$policy"
	own_policy=1
fi
trap '[ "$own_policy" = 1 ] && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1; then
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
