package bench

import (
	"context"
	"log/slog"
)

// startProfile starts the Runner's Profiler, if any, on the server's
// processes (the postmaster and its running children; backends forked
// later inherit the recording) and returns what stops it and stores the
// profile in s. Without perf or permission the profile carries a
// warning; the sample itself never fails for want of a profile.
func (r *Runner) startProfile(ctx context.Context, c *cluster, s *Sample) (stop func()) {
	if r.Profiler == nil {
		return func() {}
	}
	pm := c.postmasterPID()
	var pids []int
	if pm > 0 {
		pids = append([]int{pm}, children(pm)...)
	}
	rec := r.Profiler.Start(ctx, pids)
	return func() {
		p := rec.Stop(ctx)
		if p.Warning != "" {
			r.log().Warn("CPU profile", slog.String("warning", p.Warning))
		}
		s.Profile = &p
	}
}
