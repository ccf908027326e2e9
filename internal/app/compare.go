package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/bench/stats"
)

// CompareResult is what a comparison found (the JSON of 'pgbisect compare
// --json').
type CompareResult struct {
	Scenario string `json:"scenario"`
	A        string `json:"a"`
	B        string `json:"b"`
	// Patches are the patches (files, then those the request carried)
	// applied on top of A to make B.
	Patches    []string         `json:"patches,omitempty"`
	ClientBin  string           `json:"client_bin"`
	Thresholds stats.Thresholds `json:"thresholds"`
	// OrderSeed seeds the order of samples (bench.Order; one order per
	// point, seeded stats.Mix64(OrderSeed+i)): --order-seed repeats it.
	OrderSeed uint64               `json:"order_seed"`
	Points    []ComparePointResult `json:"points"`
	Elapsed   time.Duration        `json:"elapsed_ns"`
}

// ComparePointResult is the comparison at one matrix point.
type ComparePointResult struct {
	Point   string                `json:"point"`
	Metrics []CompareMetricResult `json:"metrics"`
	Env     bench.Environment     `json:"environment"`
	// Profile is where B's CPU time went against A's, from --profile runs.
	Profile *profile.Summary `json:"profile,omitempty"`
}

// CompareMetricResult is the verdict on one metric at one point.
type CompareMetricResult struct {
	Name       string           `json:"name"`
	Unit       string           `json:"unit"`
	Better     string           `json:"better"`
	Comparison stats.Comparison `json:"comparison"`
	// Record marks a metric the scenario records but does not judge.
	Record bool      `json:"record,omitempty"`
	A      []float64 `json:"a_values"`
	B      []float64 `json:"b_values"`
}

// Compare measures two builds interleaved with adaptive sampling (one
// bench.Sequential per point) and judges every metric. A comparison's
// verdict is final, so it uses stats' defaults (alpha 0.01) under the App's
// stats section, not the bisection search's liberal ones.
//
// Its last event is KindDone, with the verdicts in Result (or the Error).
//
// Compare is the local command line's: A or B may be an installation's bin
// directory. A queued comparison (runJob) is someone else's, whose
// revisions are only ever built, never looked up on the disk.
func (a *App) Compare(ctx context.Context, req CompareRequest, sink Sink) (*CompareResult, error) {
	return a.compareDone(ctx, req, true, sink)
}

// compareDone runs a comparison, local if its revisions may be bin
// directories, and emits KindDone.
func (a *App) compareDone(ctx context.Context, req CompareRequest, local bool, sink Sink) (*CompareResult, error) {
	res, err := a.compare(ctx, req, local, sink)
	done := Event{Kind: KindDone}
	if err != nil {
		done.Error = err.Error()
	} else {
		done.Result = CompareSummary(res)
	}
	sink.emit(done)
	return res, err
}

func (a *App) compare(ctx context.Context, req CompareRequest, local bool, sink Sink) (*CompareResult, error) {
	if req.Profile && req.ProfileRuns < 1 {
		return nil, badRequest("--profile-runs must be 1 or more (5 by default; 4 a side is the fewest that can reach p < 0.05)")
	}
	if req.FlameGraph != "" && !req.Profile {
		return nil, badRequest("--flamegraph needs --profile")
	}
	if err := req.checkPatches(); err != nil {
		return nil, err
	}
	file, err := a.scenarioFile(req.Scenario)
	if err != nil {
		return nil, err
	}
	sc, err := bench.LoadFileWith(file, req.Set)
	if err != nil {
		return nil, err
	}
	base := a.opts.Stats.Apply(stats.DefaultThresholds)
	flags := &stats.Overlay{Alpha: req.Alpha, MinEffect: req.MinEffect, MaxSamples: req.MaxSamples, MaxTime: req.MaxTime}
	th := sc.Thresholds(base, nil, flags)
	points, err := pointsOf(sc, req.Point)
	if err != nil {
		return nil, err
	}
	unlock, err := a.LockMachine(ctx, true, sink)
	if err != nil {
		return nil, err
	}
	defer unlock()

	revs := []string{req.A, req.B}
	patchedName := ""
	if len(req.Patches) > 0 || len(req.PatchData) > 0 {
		if revs, patchedName, err = a.comparePatched(ctx, req.A, req.Patches, req.PatchData, sink); err != nil {
			return nil, err
		}
	}
	var targets [2]bench.Target
	for i, rev := range revs {
		if targets[i], err = a.target(ctx, rev, local && patchedName == "", sink); err != nil {
			return nil, err
		}
	}
	if patchedName != "" {
		targets[1].Name = patchedName
	}
	if targets[0].Name == targets[1].Name {
		// The same commit on both sides (an A/A check): tell the sides apart.
		targets[0].Name += "(A)"
		targets[1].Name += "(B)"
	}
	if targets[0].BinDir == targets[1].BinDir {
		sink.note("note: %s and %s share one build; comparing it with itself", revs[0], revs[1])
	}
	// One pgbench for both sides, so a change in the client is not
	// mistaken for a change in the server.
	r, err := a.newRunner(firstNonEmpty(req.ClientBin, a.opts.ClientBin, targets[0].BinDir), req.KeepClusters,
		newLineWriter(sink, KindNote), a.log)
	if err != nil {
		return nil, err
	}
	defer r.Close(context.WithoutCancel(ctx))

	start := time.Now()
	seed := req.OrderSeed
	for seed == 0 {
		seed = rand.Uint64()
	}
	res := &CompareResult{Scenario: sc.Name, A: targets[0].Name, B: targets[1].Name, Patches: patchNames(req), ClientBin: r.ClientBin, Thresholds: th, OrderSeed: seed}
	for i, pt := range points {
		order := bench.Order{Seed: stats.Mix64(seed + uint64(i)), Targets: 2}
		pr, err := comparePoint(ctx, r, sc, targets, pt, order, base, flags, sink)
		if err != nil {
			return nil, err
		}
		if req.Profile {
			if pr.Profile, err = compareProfiled(ctx, r, sc, targets, pt, order, req.ProfileRuns, flameGraphPath(req.FlameGraph, pt, len(points)), sink); err != nil {
				return nil, err
			}
		}
		res.Points = append(res.Points, pr)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// comparePoint runs the sequential comparison of both targets at pt.
// Thresholds are layered by sc.Thresholds over base (the defaults with the
// App's stats) with the request's on top: the scenario's plan the samples,
// each metric's judge it.
func comparePoint(ctx context.Context, r *bench.Runner, sc *bench.Scenario, targets [2]bench.Target, pt bench.Point, order bench.Order, base stats.Thresholds, flags *stats.Overlay, sink Sink) (ComparePointResult, error) {
	pr := ComparePointResult{Point: pt.String()}
	if err := r.Check(ctx, sc, targets[:], pt); err != nil {
		return pr, err
	}
	th := sc.Thresholds(base, nil, flags)
	var count [2]int // samples per side
	want := th.FirstLook()
	start := time.Now()
	q := &bench.Sequential{
		Scenario: sc, Point: pt, Targets: targets, Order: order, Plan: th,
		Judge: func(m bench.Metric) stats.Thresholds { return sc.Thresholds(base, &m, flags) },
		After: func(side int, s *bench.Sample) error {
			pr.Env = s.Env
			count[side]++
			sink.emit(Event{Kind: KindSample, Target: s.Target, Point: pt.String(), Done: count[side], Of: want,
				Text: fmt.Sprintf("compare%s: %s sample %d/%d of up to %d per side, %s elapsed",
					pointLabel(pt), s.Target, count[side], want, th.MaxSamples, time.Since(start).Round(time.Second))})
			return nil
		},
		Look: func(n, more int) {
			sink.note("compare%s: not yet decided at n=%d per side; taking %d more each", pointLabel(pt), n, more)
			want = n + more
		},
	}
	ms, err := q.Run(ctx, r)
	if err != nil {
		return pr, err
	}
	for _, m := range ms {
		pr.Metrics = append(pr.Metrics, CompareMetricResult{
			Name: m.Metric.Name, Unit: m.Metric.Unit, Better: better(m.Metric.Direction), Comparison: m.Comparison,
			Record: m.Metric.Record, A: m.A, B: m.B,
		})
	}
	return pr, nil
}

// target builds rev, or, when binDirs (the local command line's
// comparison) and rev is a directory holding pg_ctl (an installation's
// bin directory), measures that installation as it is. Without binDirs
// rev is only ever a revision: a request's "tmp/evil/bin" is built, or
// fails to resolve, whatever the daemon's disk holds.
func (a *App) target(ctx context.Context, rev string, binDirs bool, sink Sink) (bench.Target, error) {
	if !binDirs {
		if err := checkRevision(rev); err != nil {
			return bench.Target{}, err
		}
		return a.buildTarget(ctx, rev, sink)
	}
	if st, err := os.Stat(filepath.Join(rev, "pg_ctl")); err == nil && !st.IsDir() {
		abs, err := filepath.Abs(rev)
		if err != nil {
			return bench.Target{}, err
		}
		return bench.Target{Name: abs, BinDir: abs, BuildOptions: "installed at " + abs}, nil
	}
	return a.buildTarget(ctx, rev, sink)
}

// buildTarget builds rev, or takes its build from the cache, and returns
// it as the target to measure.
func (a *App) buildTarget(ctx context.Context, rev string, sink Sink) (bench.Target, error) {
	b, repo, err := a.Builder(ctx, sink)
	if err != nil {
		return bench.Target{}, err
	}
	c, err := a.resolve(ctx, repo, rev, sink)
	if err != nil {
		return bench.Target{}, err
	}
	sink.note("building %s %s (or reusing its cached build)", c.Short(), c.Subject)
	sink.emit(Event{Kind: KindBuildStarted, Commit: c.Hash})
	inst, err := b.Build(ctx, c.Hash)
	if err != nil {
		sink.emit(Event{Kind: KindBuildFailed, Commit: c.Hash, Error: err.Error()})
		return bench.Target{}, fmt.Errorf("building %s: %w", c.Short(), err)
	}
	sink.emit(Event{Kind: KindBuildFinished, Commit: c.Hash, Target: inst.BinDir()})
	return bench.Target{Name: c.Short(), BinDir: inst.BinDir(), BuildOptions: inst.Options.String()}, nil
}

// pointsOf is the scenario's matrix points, or only the one named.
func pointsOf(sc *bench.Scenario, point string) ([]bench.Point, error) {
	if point == "" {
		return sc.Points(), nil
	}
	pt, err := sc.FindPoint(point)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return []bench.Point{pt}, nil
}

// better says which way a metric is better, as results show it.
func better(d stats.Direction) string {
	if d == stats.HigherIsBetter {
		return "higher"
	}
	return "lower"
}

func pointLabel(pt bench.Point) string {
	if s := pt.String(); s != "" {
		return " [" + s + "]"
	}
	return ""
}

// patchNames names the patches of req, files first.
func patchNames(req CompareRequest) []string {
	out := append([]string(nil), req.Patches...)
	for _, d := range req.PatchData {
		out = append(out, d.Name)
	}
	return out
}

// CompareSummary is a comparison's verdicts, one line per judged metric:
// "clients=4 copy_time: regression, B/A 1.104 [1.081, 1.128], p 0.0004,
// n 20+20".
func CompareSummary(res *CompareResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: A = %s, B = %s\n", res.Scenario, res.A, res.B)
	for _, p := range res.Points {
		for _, m := range p.Metrics {
			if m.Record {
				continue
			}
			c := m.Comparison
			pt := p.Point
			if pt != "" {
				pt += " "
			}
			fmt.Fprintf(&b, "%s%s: %s, B/A %.3f [%.3f, %.3f], p %.2g, n %d+%d\n", pt, m.Name, c.Verdict, c.Ratio, c.Lo, c.Hi, c.P, c.A.N, c.B.N)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
