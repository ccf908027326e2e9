package nightly

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
)

// buildFailure is the finding that the branch head does not build.
func buildFailure(branch string, good, bad build.Commit, err error, now time.Time) *finding.Finding {
	f := &finding.Finding{
		ID:       finding.NewID(now, "build", bad.Hash),
		Kind:     finding.BuildFailure,
		Branch:   branch,
		Good:     notifyCommit(good),
		Bad:      notifyCommit(bad),
		Started:  now,
		Finished: now,
	}
	var be *build.Error
	if errors.As(err, &be) {
		f.Warnings = append(f.Warnings, fmt.Sprintf("%s failed; the log is %s; its end:\n%s", be.Phase, be.LogPath, be.Tail))
	} else {
		f.Warnings = append(f.Warnings, err.Error())
	}
	return f
}

// comparisonFinding reports one night-to-night (or change-point) verdict
// without a bisection. When bad is good's only child the culprit is known:
// bad itself.
func comparisonFinding(kind finding.Kind, branch string, r MetricResult, good, bad build.Commit, now time.Time) *finding.Finding {
	cmp := notifyComparison(r.spec, r.Point, r.cmp)
	f := &finding.Finding{
		ID:          finding.NewID(now, r.Scenario, bad.Hash),
		Kind:        kind,
		Branch:      branch,
		Scenario:    r.Scenario,
		Metric:      r.Metric,
		Unit:        r.spec.Unit,
		Direction:   r.spec.Direction,
		Point:       r.Point,
		Good:        notifyCommit(good),
		Bad:         notifyCommit(bad),
		Comparisons: []finding.Comparison{cmp},
		Started:     now,
		Finished:    now,
		Samples:     r.cmp.A.N + r.cmp.B.N,
		Warnings:    slices.Clone(r.cmp.Warnings),
	}
	if len(bad.Parents) == 1 && bad.Parents[0] == good.Hash {
		f.Culprits = []finding.Culprit{{Commit: f.Bad, Parent: f.Good, Comparisons: []finding.Comparison{cmp}, Verified: true}}
	}
	return f
}

func notifyComparison(m bench.Metric, point string, c stats.Comparison) finding.Comparison {
	return finding.FromStats(m.Name, m.Unit, point, c)
}

func notifyCommit(c build.Commit) finding.Commit {
	nc := finding.Commit{Hash: c.Hash, Subject: c.Subject, Date: c.Date}
	if c.Author != "" {
		nc.Author = c.Author
		if c.AuthorEmail != "" {
			nc.Author += " <" + c.AuthorEmail + ">"
		}
	}
	return nc
}

// series returns the nightly history of one metric for a report, with the
// given change points marked.
func (p *Pass) series(ctx context.Context, scenario, metric, unit, point string, cps []finding.ChangePoint) *finding.Series {
	pts, err := p.Store.Series(ctx, p.Branch, scenario, metric, point)
	if err != nil || len(pts) == 0 {
		return nil
	}
	s := &finding.Series{Metric: metric, Unit: unit, Point: point, ChangePoints: cps}
	for _, sp := range pts {
		s.Points = append(s.Points, finding.SeriesPoint{At: sp.Time, Commit: build.Short(sp.Commit), Median: stats.Summarize(sp.Values).Median})
	}
	return s
}
