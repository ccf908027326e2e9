// Package faults holds pgbisect's fault-injection tests and nothing else:
// a bisection killed with SIGKILL at random moments and resumed, the
// results store stopping in the middle of one, a state directory on a full
// filesystem, and two processes that must never measure at once. They
// drive the real engine, state saver, machine lock and results store; only
// the builds and the measurements are simulated (package bisect's
// SimHistory), so that CI can afford them. README's "Faults injected"
// table lists what they show; -faults.kills raises the number of kills
// for a longer run by hand.
package faults
