package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/notify"
)

// NightlySuite loads the nightly suite's scenarios; an empty suite is an
// error saying where to list them.
func (a *App) NightlySuite() ([]*bench.Scenario, error) {
	var out []*bench.Scenario
	for _, path := range a.opts.Nightly {
		sc, err := bench.LoadFile(path)
		if err != nil {
			return nil, fmt.Errorf("nightly suite: %w", err)
		}
		out = append(out, sc)
	}
	if len(out) == 0 {
		return nil, errors.New("the nightly suite is empty: list scenario files under nightly.scenarios in the config")
	}
	return out, nil
}

// Nightly runs one nightly pass over the App's branch and suite: fetch,
// build the head, compare it with the last measured night, bisect each
// confirmed regression (Bisect, its finding recorded with the night's
// series), report improvements and build failures, look for change points.
// The result is returned even when the pass failed part way, with the
// error.
func (a *App) Nightly(ctx context.Context, req NightlyRequest, sink Sink) (*nightly.Result, error) {
	unlock, err := a.LockMachine(ctx, req.Wait, sink)
	if err != nil {
		return nil, err
	}
	defer unlock()
	scenarios, err := a.NightlySuite()
	if err != nil {
		return nil, err
	}
	results, err := a.Store(ctx)
	if err != nil {
		return nil, err
	}
	builder, repo, err := a.Builder(ctx, sink)
	if err != nil {
		return nil, err
	}
	recordBuilds(builder, results, a.log)
	runner, err := a.newRunner(a.opts.ClientBin, false, nil, a.log)
	if err != nil {
		return nil, err
	}
	defer runner.Close(context.WithoutCancel(ctx))
	var clientBin func(string)
	if a.opts.ClientBin == "" {
		clientBin = func(dir string) { runner.ClientBin = dir }
	}
	p := &nightly.Pass{
		ClientBin:    clientBin,
		Branch:       a.opts.Branch,
		Scenarios:    scenarios,
		Thresholds:   a.nightlyThresholds(),
		Force:        req.Force,
		BuildOptions: builder.Options().String(),
		Repo:         repo,
		Builder:      builder,
		Sampler:      runner,
		Store:        results,
		Bisect: func(ctx context.Context, r nightly.BisectRequest) (*finding.Finding, error) {
			// As 'pgbisect bisect' would run it, with the bisection's own
			// thresholds, except the smallest effect: the night-to-night
			// comparison's. The pass records the finding with its series.
			out, err := a.Bisect(ctx, "", BisectRequest{
				Scenario: r.Scenario.File, Good: r.Good.Hash, Bad: r.Bad.Hash, Metric: r.Metric, Point: r.Point,
				MinEffect: r.Thresholds.MinEffect, report: true,
			}, sink)
			if err != nil {
				return nil, err
			}
			return out.Finding, nil
		},
		Report: func(ctx context.Context, f *finding.Finding) error {
			dir, err := notify.Publish(ctx, notify.ReportsDir(a.opts.StateDir), f, results)
			if err == nil {
				sink.note("finding %s: %s", notify.Title(f), filepath.Join(dir, notify.ReportMarkdown))
			}
			return err
		},
		Log:      a.log,
		Progress: func(s string) { sink.emit(Event{Kind: KindNote, Text: s}) },
	}
	res, err := p.Run(ctx)
	if req.Deliver {
		a.Deliver(ctx, DeliverRequest{}, sink)
	}
	return res, err
}

// nightlyThresholds are the base of the night-to-night comparisons:
// bench/stats' defaults with the App's stats section over them. The pass
// layers each scenario's and metric's over them (bench.Scenario.Thresholds).
func (a *App) nightlyThresholds() stats.Thresholds {
	return a.opts.Stats.Apply(stats.DefaultThresholds).WithDefaults()
}
