// Package nightly is pgbisect's daily life: the nightly pass over a branch
// (fetch, build, measure the suite against the last good nightly build,
// bisect what got slower, watch the series for slow shifts) and its
// schedule. The daemon that runs passes and on-demand requests
// as River jobs is internal/front/jobs.
//
// The design choice that matters: one job at a time per machine, enforced
// by an flock per machine (package machinelock) that every command which measures
// also takes, because two benchmarks sharing a machine measure each other.
// Every job is resumable — the bisection saves its state after each sample
// — so stopping a daemon is just cancelling the job's context, and another
// (or the same one restarted) resumes it.
package nightly
