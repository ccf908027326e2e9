#!/usr/bin/env bash
# The soak run (issue 33, docs/soak.md): the results store, two daemons of
# one class, 'pgbisect serve' and the fake GitHub over NIGHTS compressed
# nights of a repository made from the demo's PostgreSQL tree, with
# comments, a daemon killed mid-bisection, a store restart and a bad hour
# on GitHub. It checks itself at the end and fails loudly.
#
# Usage: bash scripts/soak.sh [NIGHTS] [OUTDIR]
#   NIGHTS  default 7 (CI runs the 3-night version as part of the tests)
#   OUTDIR  default a new /tmp/pgbisect-soak.XXXXXX: summary.md (the table
#           per night, the faults, the comments and the checks that held),
#           memory.svg and store.svg (each process's RSS and the store's
#           size per night), test.log, logs/ (every process's output)
# Needs what the end-to-end tests need (scripts/setup-debian.sh --tests),
# as root; builds go to the shared test state ($PGBISECT_TEST_STATE,
# default /var/cache/pgbisect/teststate).
set -euo pipefail
cd "$(dirname "$0")/.."
nights="${1:-7}"
out="${2:-$(mktemp -d /tmp/pgbisect-soak.XXXXXX)}"
mkdir -p "$out"
chmod 0755 "$out"
echo "soak run of $nights nights; output in $out" >&2
set +e
go test -count=1 -timeout 8h -run '^TestSoak$' -v ./internal/testkit/soak \
	-soak.nights "$nights" -soak.out "$out/summary.md" -soak.logs "$out/logs" >"$out/test.log" 2>&1
code=$?
set -e
if [ -f "$out/summary.md" ]; then cat "$out/summary.md"; fi
if [ "$code" -ne 0 ]; then
	echo "the soak run FAILED (exit $code); the errors:" >&2
	grep -E '^\s+soak_test.go:[0-9]+: .*(: want|FAIL|not after|exited|never|twice|lost)' "$out/test.log" >&2 || tail -40 "$out/test.log" >&2
fi
exit "$code"
