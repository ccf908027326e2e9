#!/usr/bin/env bash
# Sets up a Debian bookworm machine (as root), builds pgbisect and runs its
# main job: a real bisection of PostgreSQL. With no network, it is the demo:
# a repository made from Debian's postgresql-15 source with injected,
# clearly labelled regressions, bisected end to end.
# Usage: bash scripts/demo.sh [pgbisect demo flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
go build -o pgbisect ./cmd/pgbisect
exec ./pgbisect demo "$@"
