// Package nightly is pgbisect's daily life: the nightly pass over a branch
// (fetch, build, measure the suite against the last good nightly build,
// bisect what got slower, watch the series for slow shifts) and the daemon
// that runs it on a cron schedule between on-demand requests.
//
// The design choice that matters: one job at a time per machine, enforced
// by an flock on the state directory (LockMachine) that every command which
// measures also takes, because two benchmarks sharing a machine measure each
// other. Every job is resumable — the bisection saves its state after each
// sample — so stopping the daemon is just cancelling the job's context, and
// the next daemon re-claims what the last one left running.
package nightly
