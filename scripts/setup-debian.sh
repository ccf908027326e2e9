#!/usr/bin/env bash
# Installs what pgbisect needs on a Debian bookworm machine, as root:
# the PostgreSQL build dependencies, Debian's postgresql-15 (its server
# binaries run the results store and the fast tests; its source is the
# fixture of the demo and the end-to-end tests), ccache, linux-perf (CPU
# profiles of culprits), and two unprivileged users of pgbisect's own:
# pgbisect-bench builds the commits and runs the benchmark servers (run_as;
# never Debian's postgres, which owns the system cluster), pgbisect runs the
# results store (db_run_as). Neither owns anything else. That is all the demo
# (scripts/demo.sh) uses.
# With --tests (scripts/test.sh) it adds what only the tests use: meson and
# ninja (18.6's end-to-end build and bisection), the sources of PostgreSQL
# 18 and, when the mirror has them, 13 and 17, Chromium
# and its fonts (the dashboard's browser tests), systemd (systemd-analyze
# verifies the shipped daemon unit; it is not PID 1 here) and
# pgbisect-probe, a user with no rights at all, who the isolation tests try
# to connect as.
# Usage: bash scripts/setup-debian.sh [--tests]
# Safe to run again: every step checks first.
set -euo pipefail

tests=
case "${1:-}" in
--tests) tests=1 ;;
"") ;;
*)
	echo "setup-debian.sh: unknown argument $1 (usage: setup-debian.sh [--tests])" >&2
	exit 2
	;;
esac

if [ "$(id -u)" != 0 ]; then
	echo "setup-debian.sh: run as root (it installs Debian packages)" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# One package a line, so that lists edited on two branches merge.
PKGS=(
	build-essential
	bison
	flex
	perl
	libreadline-dev
	zlib1g-dev
	pkg-config
	ccache
	dpkg-dev
	git
	ca-certificates
	postgresql-15
	postgresql-client-15
	procps
	linux-perf
	valgrind     # cachegrind counts instructions (the instructions metric) where perf has no hardware counters
)
TEST_PKGS=(
	meson        # PostgreSQL 16+ builds with meson too; 18.6's end-to-end test does
	ninja-build
	chromium
	fonts-liberation
	systemd      # systemd-analyze verifies the shipped daemon unit (it is not PID 1 here)
	util-linux   # flock(1), losetup: the machine-lock and loop-disk tests
	e2fsprogs    # mkfs.ext4: the loop-disk tests
)
USERS=(pgbisect pgbisect-bench)
if [ -n "$tests" ]; then
	PKGS+=("${TEST_PKGS[@]}")
	USERS+=(pgbisect-probe)
fi

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# deb-src entries so that `apt-get source` finds postgresql-15. Only the main
# archive: the security archive's source pool is not always mirrored.
if ! grep -rqs --exclude=pgbisect-other-src.sources '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
	uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	cat >/etc/apt/sources.list.d/pgbisect-src.sources <<SRC
Types: deb-src
URIs: ${uri:-http://deb.debian.org/debian}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	need_update=1
fi

# deb-src entries of other releases, whose PostgreSQL sources are fixtures
# too: bullseye (postgresql-13), trixie (postgresql-17), sid
# (postgresql-18). Source entries only: which binary packages the machine
# installs, and from where, does not change. Only the tests use them.
if [ -n "$tests" ] && [ ! -e /etc/apt/sources.list.d/pgbisect-other-src.sources ]; then
	uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	cat >/etc/apt/sources.list.d/pgbisect-other-src.sources <<SRC
Types: deb-src
URIs: ${uri:-http://deb.debian.org/debian}
Suites: bullseye trixie sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	need_update=1
fi

if [ "${#missing[@]}" -gt 0 ] || [ -n "${need_update:-}" ]; then
	apt-get update -qq
fi
if [ "${#missing[@]}" -gt 0 ]; then
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian's PostgreSQL source tarballs: the PostgreSQL sources the tests and
# the demo import into git repositories (internal/base/pgsrc). 15 (the demo and
# most tests) and 18 (the meson end-to-end test and bisection) are
# required; 13 (opt-in tests) and 17 are fetched when the mirror has them:
# this machine's mirror answered 404 for postgresql-17's files although
# apt-cache lists them, so 17 is tried and skipped with a warning.
SRC_DIR="${PGBISECT_PGSRC_DIR:-/var/cache/pgbisect/pgsrc}"
mkdir -p "$SRC_DIR"
fetch_source() { # major required
	local major=$1 required=$2 v
	if ls "$SRC_DIR"/postgresql-"$major"_*.orig.tar.* >/dev/null 2>&1; then
		echo "setup-debian.sh: PostgreSQL $major source: $(ls "$SRC_DIR"/postgresql-"$major"_*.orig.tar.* | head -1)"
		return 0
	fi
	# Newest first; a version whose files the mirror lacks is skipped.
	for v in $(apt-cache showsrc "postgresql-$major" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -rV); do
		if (cd "$SRC_DIR" && apt-get source --download-only -qq "postgresql-$major=$v" 2>/dev/null) &&
			ls "$SRC_DIR"/postgresql-"$major"_*.orig.tar.* >/dev/null 2>&1; then
			echo "setup-debian.sh: PostgreSQL $major source: $(ls "$SRC_DIR"/postgresql-"$major"_*.orig.tar.* | head -1)"
			return 0
		fi
	done
	rm -f "$SRC_DIR"/postgresql-"$major"_*  # a partial download (a .dsc without its tarball)
	if [ "$required" = required ]; then
		echo "setup-debian.sh: could not download the postgresql-$major source package" >&2
		exit 1
	fi
	echo "setup-debian.sh: warning: could not download the postgresql-$major source package (the mirror lacks its files); its tests stay unavailable" >&2
}
fetch_source 15 required
if [ -n "$tests" ]; then
	fetch_source 18 required
	fetch_source 13 optional
	fetch_source 17 optional
fi

for u in "${USERS[@]}"; do
	if ! id -u "$u" >/dev/null 2>&1; then
		useradd --system --user-group --create-home --shell /usr/sbin/nologin "$u"
		echo "setup-debian.sh: created user $u"
	fi
done

if ! command -v go >/dev/null; then
	echo "setup-debian.sh: Go 1.26 or newer is needed on PATH (go.mod asks for it) (https://go.dev/dl)" >&2
	exit 1
fi
