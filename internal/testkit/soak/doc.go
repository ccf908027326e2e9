// Package soak runs the bot for several compressed nights the way a team
// lives with it (issue 33): the results store, two 'pgbisect daemon's of
// one class, 'pgbisect serve' and the fake GitHub (notify/githubtest),
// reached by both the poller and the webhook, over a repository made from
// the demo's PostgreSQL tree that gets new commits every night. Comments
// arrive on a schedule, a daemon is killed with SIGKILL in the middle of a
// bisection and started again, the store restarts, GitHub answers 5xx and
// then rate-limits. At the end the run checks what it must hold (nothing
// lost, nothing twice, the regression found and bisected, memory flat)
// and prints a table per night.
//
// The test is TestSoak; its nights are -soak.nights (3 by default, the CI
// version; docs/soak.md has the long run). scripts/soak.sh runs it.
package soak
