#!/usr/bin/env bash
# Sets up a Debian bookworm machine (as root) and runs every pgbisect test,
# including the end-to-end ones that build PostgreSQL 15 from source.
# Usage: bash scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-debian.sh --tests

# A fresh state directory for the shared test builds unless one is given:
# the end-to-end tests build PostgreSQL once into it and share that build.
if [ -z "${PGBISECT_TEST_STATE:-}" ]; then
	export PGBISECT_TEST_STATE="$(mktemp -d /tmp/pgbisect-test.XXXXXX)"
	trap 'rm -rf "$PGBISECT_TEST_STATE"' EXIT
fi
chmod 0755 "$PGBISECT_TEST_STATE"

unformatted="$(gofmt -l cmd internal build bench bisect notify store 2>/dev/null || true)"
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
# -p 1: one package at a time. The end-to-end tests of several packages
# build in one shared worktree and measure on the same two cores; run side
# by side they would thrash the worktree and measure each other's load.
# What git sees before and after the tests: a test that writes into the
# repository (scratch files at the root, once committed by mistake) fails CI.
tree_before="$(git status --porcelain --untracked-files=all 2>/dev/null || true)"
go test -count=1 -p 1 -timeout 80m "$@" ./...
tree_after="$(git status --porcelain --untracked-files=all 2>/dev/null || true)"
if [ "$tree_before" != "$tree_after" ]; then
	echo "the tests changed the repository's working tree (write scratch files to a temporary directory):" >&2
	diff <(echo "$tree_before") <(echo "$tree_after") >&2 || true
	exit 1
fi
