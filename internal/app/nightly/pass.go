package nightly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// Source is the repository the pass follows; *build.Repo satisfies it.
type Source interface {
	Fetch(ctx context.Context, branch string) error
	Resolve(rev string) (build.Commit, error)
}

// Builder builds a commit, or finds it in the cache; *build.Builder
// satisfies it. A commit that does not build gives an error matching
// build.ErrBuildFailed.
type Builder interface {
	Build(ctx context.Context, hash string) (*build.Install, error)
}

// Sampler takes one sample of a scenario on a build; *bench.Runner
// satisfies it.
type Sampler interface {
	Run(ctx context.Context, sc *bench.Scenario, t bench.Target, pt bench.Point) (*bench.Sample, error)
}

// Store is what the pass keeps in the results store; *store.Store
// satisfies it.
type Store interface {
	LastNightly(ctx context.Context, branch string, statuses ...string) (store.NightlyRun, error)
	RecordNightly(ctx context.Context, r *store.NightlyRun) error
	Environment(ctx context.Context, info json.RawMessage) (int64, error)
	AddSamples(ctx context.Context, samples []store.Sample) error
	RecordComparison(ctx context.Context, c store.Comparison) (int64, error)
	Series(ctx context.Context, branch, scenario, metric, point string) ([]store.SeriesPoint, error)
}

// BisectRequest asks for the culprit(s) of a regression between two
// commits.
type BisectRequest struct {
	Good, Bad build.Commit
	Scenario  *bench.Scenario
	Metric    string
	Point     string
	// Thresholds are those of the metric's night-to-night comparison (the
	// pass's with the scenario's and the metric's layered over them); the
	// bisection chases effects down to its smallest effect.
	Thresholds stats.Thresholds
}

// Nightly run statuses, as stored with each run.
const (
	StatusRunning     = "running"
	StatusUnchanged   = "unchanged"    // the head had not moved; nothing measured
	StatusFirst       = "first"        // no earlier night: the head was measured alone
	StatusOK          = "ok"           // measured; nothing changed
	StatusRegression  = "regression"   // a regression was confirmed
	StatusImprovement = "improvement"  // an improvement, no regression
	StatusBuildFailed = "build-failed" // the head does not build
	StatusFailed      = "failed"       // the pass itself failed (see Detail.Error)
)

// measured are the statuses of nights whose head was built and measured:
// the baseline of the next night is the latest of them.
var measured = []string{StatusFirst, StatusOK, StatusRegression, StatusImprovement}

// Pass is one nightly pass over a branch: fetch, build the head, measure
// each scenario of the suite against the last measured night's build
// (interleaved, adaptive), bisect each confirmed regression, report
// improvements and build failures, then look for slow shifts over each
// nightly series with change-point detection and confirm each one with a
// fresh comparison before believing it.
type Pass struct {
	Branch    string
	Scenarios []*bench.Scenario
	// Thresholds are the defaults with the config file's stats section
	// over them. Each comparison layers its scenario's stats section and
	// its metric's min_effect over them (bench.Scenario.Thresholds), as
	// every command does.
	Thresholds stats.Thresholds
	// Force measures the head even when it has not moved since the last
	// pass.
	Force bool
	// BuildOptions describes the build options, recorded with each sample.
	BuildOptions string

	Repo    Source
	Builder Builder
	Sampler Sampler
	Store   Store
	// Bisect finds the culprit(s) of a confirmed regression and returns the
	// finding (a regression with culprits, or what the bisection found
	// instead).
	Bisect func(ctx context.Context, req BisectRequest) (*finding.Finding, error)
	// Report records a finding and posts it where posting is configured.
	Report func(ctx context.Context, f *finding.Finding) error
	// ClientBin, when set, is told the bin directory of the older build
	// before each comparison, so that one pgbench and psql serve both
	// sides (a change in the client is not mistaken for one in the
	// server). Leave it nil when a fixed client is configured.
	ClientBin func(dir string)

	// Log gets structured logs; Progress one line per step for the
	// person (or daemon status) watching. Both may be nil.
	Log      *slog.Logger
	Progress func(string)
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Detail is what a nightly run keeps in the store besides its status.
type Detail struct {
	Head string `json:"head"`
	Base string `json:"base,omitempty"` // the night compared against
	// Results are the night-to-night verdicts.
	Results []MetricResult `json:"results,omitempty"`
	// Findings are the IDs of the findings reported by this pass.
	Findings []string `json:"findings,omitempty"`
	// ChangePoints are the candidates the change-point pass checked.
	ChangePoints []Candidate `json:"change_points,omitempty"`
	// Handled are the keys (see shiftKey) of shifts already explained or
	// checked, carried from night to night so that a shift is bisected once.
	Handled []string `json:"handled,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// MetricResult is one night-to-night verdict.
type MetricResult struct {
	Scenario string  `json:"scenario"`
	Point    string  `json:"point,omitempty"`
	Metric   string  `json:"metric"`
	Verdict  string  `json:"verdict"`
	Change   float64 `json:"change"` // head/base median - 1, signed
	// Direction says which way the metric is better, so that Change reads
	// right: -0.22 of a higher-is-better tps is a regression.
	Direction stats.Direction `json:"direction,omitempty"`
	Worse     float64         `json:"worse"` // Change turned so that positive is worse
	P         float64         `json:"p"`
	N         int             `json:"n"` // samples per side

	cmp  stats.Comparison
	spec bench.Metric
	sc   *bench.Scenario
	th   stats.Thresholds // the comparison's, layered for its metric
}

// Result is what one pass did.
type Result struct {
	Run      store.NightlyRun
	Detail   Detail
	Findings []*finding.Finding
}

// maxHandled bounds the carried list of handled shifts.
const maxHandled = 500

// Run runs the pass. It records the night in the store whatever happens;
// a pass interrupted by ctx is recorded as failed and runs again (the
// builds and the bisections' state are kept, so little is repeated).
func (p *Pass) Run(ctx context.Context) (res *Result, err error) {
	p.defaults()
	p.progress("fetching %s", p.Branch)
	if err := p.Repo.Fetch(ctx, p.Branch); err != nil {
		return nil, err
	}
	head, err := p.resolveHead()
	if err != nil {
		return nil, err
	}
	last, err := p.Store.LastNightly(ctx, p.Branch)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var prev Detail
	_ = json.Unmarshal(last.Detail, &prev)
	res = &Result{Detail: Detail{Head: head.Hash, Handled: prev.Handled}}
	res.Run = store.NightlyRun{Branch: p.Branch, Commit: head.Hash, Status: StatusRunning, Started: p.Now()}

	if !p.Force && last.Commit == head.Hash && last.Status != StatusRunning && last.Status != StatusFailed {
		p.log().Info("nightly: head unchanged", slog.String("branch", p.Branch), slog.String("commit", build.Short(head.Hash)))
		p.progress("%s is still at %s: nothing to do", p.Branch, build.Short(head.Hash))
		res.Run.Status = StatusUnchanged
		res.Run.Finished = p.Now()
		res.Run.Detail, _ = json.Marshal(res.Detail)
		return res, p.Store.RecordNightly(ctx, &res.Run)
	}
	res.Run.Detail, _ = json.Marshal(res.Detail)
	if err := p.Store.RecordNightly(ctx, &res.Run); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			res.Run.Status = StatusFailed
			res.Detail.Error = err.Error()
		}
		if len(res.Detail.Handled) > maxHandled {
			res.Detail.Handled = res.Detail.Handled[len(res.Detail.Handled)-maxHandled:]
		}
		res.Run.Finished = p.Now()
		res.Run.Detail, _ = json.Marshal(res.Detail)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if rerr := p.Store.RecordNightly(rctx, &res.Run); rerr != nil && err == nil {
			err = rerr
		}
		p.log().Info("nightly: pass", slog.String("branch", p.Branch), slog.String("commit", build.Short(head.Hash)),
			slog.String("status", res.Run.Status), slog.Int("findings", len(res.Findings)))
	}()

	base, err := p.Store.LastNightly(ctx, p.Branch, measured...)
	hasBase := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return res, err
	}

	p.progress("building %s (%s)", build.Short(head.Hash), head.Subject)
	headInst, err := p.Builder.Build(ctx, head.Hash)
	if errors.Is(err, build.ErrBuildFailed) {
		res.Run.Status = StatusBuildFailed
		if last.Status == StatusBuildFailed {
			// Reported on the first night it failed; not again each night.
			return res, nil
		}
		var good build.Commit
		if hasBase {
			good = p.commit(base.Commit)
		}
		return res, p.report(ctx, res, buildFailure(p.Branch, good, head, err, p.Now()))
	}
	if err != nil {
		return res, err
	}
	headT := p.side(head, headInst)

	if !hasBase {
		res.Run.Status = StatusFirst
		for _, sc := range p.Scenarios {
			for _, pt := range sc.Points() {
				if _, err := p.measure(ctx, res.Run.ID, sc, pt, nil, headT); err != nil {
					return res, err
				}
			}
		}
		return res, nil
	}

	baseCommit := p.commit(base.Commit)
	res.Detail.Base = base.Commit
	p.progress("building %s, the last measured night", build.Short(base.Commit))
	baseInst, err := p.Builder.Build(ctx, base.Commit)
	if err != nil {
		return res, fmt.Errorf("building the last measured night %s: %w", build.Short(base.Commit), err)
	}
	baseT := p.side(baseCommit, baseInst)

	res.Run.Status = StatusOK
	var results []MetricResult
	for _, sc := range p.Scenarios {
		for _, pt := range sc.Points() {
			rs, err := p.measure(ctx, res.Run.ID, sc, pt, &baseT, headT)
			if err != nil {
				return res, err
			}
			results = append(results, rs...)
		}
	}
	res.Detail.Results = results
	if err := p.act(ctx, res, results, baseCommit, head); err != nil {
		return res, err
	}
	if err := p.changePoints(ctx, res); err != nil {
		return res, err
	}
	return res, nil
}

// act bisects each confirmed regression (once per scenario and point, on
// its worst metric) and reports each improvement.
func (p *Pass) act(ctx context.Context, res *Result, results []MetricResult, good, bad build.Commit) error {
	type group struct{ scenario, point string }
	worst := map[group]MetricResult{}
	var order []group
	for _, r := range results {
		g := group{r.Scenario, r.Point}
		if !r.cmp.Verdict.Different() {
			continue
		}
		// A significant change smaller than the smallest effect that
		// matters is recorded, not chased; if it builds up over nights,
		// the change-point pass sees it.
		if math.Abs(r.Worse) < r.th.MinEffect {
			continue
		}
		res.Detail.Handled = append(res.Detail.Handled, shiftKey(r.Scenario, r.Point, r.Metric, bad.Hash))
		switch r.cmp.Verdict {
		case stats.Regression:
			res.Run.Status = StatusRegression
			if w, ok := worst[g]; !ok || r.Worse > w.Worse {
				if !ok {
					order = append(order, g)
				}
				worst[g] = r
			}
		case stats.Improvement:
			if res.Run.Status == StatusOK {
				res.Run.Status = StatusImprovement
			}
			f := comparisonFinding(finding.Improvement, p.Branch, r, good, bad, p.Now())
			if err := p.report(ctx, res, f); err != nil {
				return err
			}
		}
	}
	for _, g := range order {
		if err := p.bisect(ctx, res, worst[g], good, bad); err != nil {
			return err
		}
	}
	return nil
}

// bisect runs the bisection of one regression and reports its finding.
func (p *Pass) bisect(ctx context.Context, res *Result, r MetricResult, good, bad build.Commit) error {
	p.progress("bisecting %s %s %s: %s..%s", r.Scenario, r.Point, r.Metric, build.Short(good.Hash), build.Short(bad.Hash))
	f, err := p.Bisect(ctx, BisectRequest{Good: good, Bad: bad, Scenario: r.sc, Metric: r.Metric, Point: r.Point, Thresholds: r.th})
	if err != nil {
		return fmt.Errorf("bisecting %s %s between %s and %s: %w", r.Scenario, r.Metric, build.Short(good.Hash), build.Short(bad.Hash), err)
	}
	if f.Branch == "" {
		f.Branch = p.Branch
	}
	// Reports name the scenario, not the file it was loaded from.
	f.Scenario = r.Scenario
	if f.Series == nil {
		f.Series = p.series(ctx, r.Scenario, r.Metric, r.spec.Unit, r.Point, nil)
	}
	return p.report(ctx, res, f)
}

func (p *Pass) report(ctx context.Context, res *Result, f *finding.Finding) error {
	res.Findings = append(res.Findings, f)
	res.Detail.Findings = append(res.Detail.Findings, f.ID)
	p.log().Info("nightly: finding", slog.String("id", f.ID), slog.String("kind", string(f.Kind)), slog.String("title", notify.Title(f)))
	if p.Report == nil {
		return nil
	}
	if err := p.Report(ctx, f); err != nil {
		return fmt.Errorf("reporting %s: %w", f.ID, err)
	}
	return nil
}

// resolveHead finds the fetched head: origin/branch where the repository
// has a remote, else the branch itself.
func (p *Pass) resolveHead() (build.Commit, error) {
	c, err := p.Repo.Resolve("origin/" + p.Branch)
	if err == nil {
		return c, nil
	}
	c, err2 := p.Repo.Resolve(p.Branch)
	if err2 != nil {
		return c, fmt.Errorf("finding the head of %s: %w", p.Branch, err2)
	}
	return c, nil
}

// commit describes hash, or gives just the hash when the repository cannot.
func (p *Pass) commit(hash string) build.Commit {
	c, err := p.Repo.Resolve(hash)
	if err != nil {
		return build.Commit{Hash: hash}
	}
	return c
}

func (p *Pass) defaults() {
	if p.Branch == "" {
		p.Branch = "master"
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	p.Thresholds = p.Thresholds.WithDefaults()
}

func (p *Pass) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func (p *Pass) progress(format string, args ...any) {
	if p.Progress != nil {
		p.Progress(fmt.Sprintf(format, args...))
	}
}

// shiftKey names a shift of one series by the first commit after it.
func shiftKey(scenario, point, metric, at string) string {
	return fmt.Sprintf("%s|%s|%s|%s", scenario, point, metric, build.Short(at))
}

// handledNear reports whether a shift of the series at any of the commits
// was already handled.
func (d *Detail) handledNear(scenario, point, metric string, commits []string) bool {
	for _, c := range commits {
		if slices.Contains(d.Handled, shiftKey(scenario, point, metric, c)) {
			return true
		}
	}
	return false
}
