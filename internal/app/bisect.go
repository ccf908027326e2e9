package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/finding"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// BisectResult is what a finished bisection leaves behind.
type BisectResult struct {
	State     *bisect.State
	Finding   *finding.Finding
	ReportDir string
}

// Bisect checks the request, then starts or resumes the bisection, runs it
// to the end and writes its reports. Its events are recorded in the results
// store under jobID, or, when jobID is "", under the bisection's ID from
// the moment it is known, so another process can follow it
// (store.FollowEvents). An error in the request matches ErrBadRequest.
func (a *App) Bisect(ctx context.Context, jobID string, req BisectRequest, sink Sink) (*BisectResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	// Benchmarks must not overlap: wait for a nightly pass, a daemon job or
	// another run on this machine (a nested call from the daemon shares the
	// hold of its job).
	unlock, err := a.LockMachine(ctx, true, sink)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Events are durable once the store is open (a queued job's is: the
	// queue is in it); a command opens it once the inputs are known to be
	// good, before anything is built or measured.
	j := newJournal(ctx, a.results, jobID, sink, a.log)
	openStore := func() (*store.Store, error) {
		results, err := a.Store(ctx)
		if err != nil {
			return nil, err
		}
		j.setStore(results)
		return results, nil
	}
	res, err := a.bisect(ctx, req, j, openStore)
	done := Event{Kind: KindDone}
	if err != nil {
		done.Error = err.Error()
	} else {
		done.Bisection, done.Finding = res.State.ID, res.Finding.ID
	}
	j.sink().emit(done)
	return res, err
}

// bisect runs Bisect's request, its events going to j.
func (a *App) bisect(ctx context.Context, req BisectRequest, j *journal, openStore func() (*store.Store, error)) (*BisectResult, error) {
	sink := j.sink()
	repoSource := a.opts.Repo
	var saver *store.Store
	var st *bisect.State
	var err error
	if req.Resume != "" {
		if saver, err = openStore(); err != nil {
			return nil, err
		}
		if st, err = saver.LoadBisection(ctx, req.Resume); err != nil {
			return nil, err
		}
		in := st.Inputs
		req.Scenario, req.Set, req.Good, req.Bad = in.Scenario, in.Set, in.Good, in.Bad
		req.Metric, req.Point, req.FirstParent, req.thresholds = in.Metric, in.Point, in.FirstParent, in.Thresholds
		if len(in.Points) > 0 {
			req.Point = finding.PointList(in.Points)
		}
		repoSource = in.Repo
	}
	if !build.IsURL(repoSource) {
		if abs, err := filepath.Abs(repoSource); err == nil {
			repoSource = abs
		}
	}
	if abs, err := filepath.Abs(req.Scenario); err == nil {
		req.Scenario = abs
	}

	// Check everything that can be checked before building anything.
	sc, err := bench.LoadFileWith(req.Scenario, req.Set)
	if err != nil {
		return nil, err
	}
	metric, err := bisectMetric(sc, req.Metric)
	if err != nil {
		return nil, err
	}
	points, err := bisectPoints(sc, req.Point)
	if err != nil {
		return nil, err
	}
	point := points[0]
	th := req.thresholds
	if th == (stats.Thresholds{}) {
		th = sc.Thresholds(a.opts.Stats.Apply(bisect.DefaultThresholds), &metric,
			&stats.Overlay{Alpha: req.Alpha, MinEffect: req.MinEffect, MaxSamples: req.MaxSamples})
	}
	builder, repo, err := a.builderFor(ctx, repoSource, sink)
	if err != nil {
		return nil, err
	}
	good, bad, givenGood, err := a.bisectResolve(ctx, repo, req.Good, req.Bad, sink)
	if err != nil {
		return nil, err
	}
	if saver == nil {
		if saver, err = openStore(); err != nil {
			return nil, err
		}
	}
	results := saver
	recordBuilds(builder, results, a.log)
	in := bisect.Inputs{
		Repo: repoSource, Good: good.Hash, Bad: bad.Hash, Scenario: req.Scenario, Set: req.Set,
		Metric: metric.Name, Unit: metric.Unit, Direction: metric.Direction, Point: point.String(),
		FirstParent: req.FirstParent, Thresholds: th, GivenGood: givenGood,
	}
	if len(points) > 1 {
		if req.MaxTime > 0 {
			return nil, badRequest("--max-time bounds a bisection of one point; %d points (--point %s) cannot be bounded yet: drop --max-time, or bisect one point at a time", len(points), req.Point)
		}
		in.Point, in.Points = "", pointNames(points)
	}
	if st == nil {
		st, err = saver.LoadBisection(ctx, bisect.ID(in))
		switch {
		case err == nil:
			j.setJob(st.ID)
			sink.note("resuming bisection %s: %d builds and %d samples already taken", st.ID, st.BuildsDone, st.SamplesTaken)
		case errors.Is(err, bisect.ErrNotFound):
			if st, err = bisectNewState(ctx, repo, builder, in, good, sink); err != nil {
				return nil, err
			}
			if req.ReuseSamples {
				st.SetWindow(0)
			}
			st.MaxTime = req.MaxTime
			switch {
			case req.profileGuided() && st.Curve == nil:
				st.Guide = &bisect.Guide{}
			case req.profileGuided():
				// The searches of several points give each other hints
				// instead; a profile of the endpoints is not taken.
				sink.note("profile-guided search is for a bisection of one point; these %d points search unguided (each point's suspects guide the others)", len(points))
			}
			// Saved at once, so the ID printed below resumes even if the
			// first build or sample fails.
			if err := saver.SaveBisection(ctx, st); err != nil {
				return nil, err
			}
			j.setJob(st.ID)
			sink(Event{Kind: KindStart, Bisection: st.ID,
				Text: fmt.Sprintf("bisection %s: %d commits, %d can be culprits (resume with: pgbisect bisect --resume %s)",
					st.ID, len(st.Commits), st.CandidateCount(), st.ID)})
		default:
			return nil, err
		}
	} else {
		j.setJob(st.ID)
	}
	bisectBound(st, req.MaxTime, sink)

	// Measure.
	bb := &bisectBuilder{b: builder, sink: sink}
	runner, err := a.newRunner(firstNonEmpty(req.ClientBin, a.opts.ClientBin), req.KeepClusters, nil,
		slog.New(&onceHandler{Handler: a.log.Handler()}))
	if err != nil {
		return nil, err
	}
	defer runner.Close(context.WithoutCancel(ctx))
	m := &bisectMeasurer{runner: runner, sc: sc, point: point, points: points, metric: metric.Name, results: results, id: st.ID, state: st, sink: sink}
	if !st.Done() && runner.ClientBin == "" {
		// One pgbench and psql for every run: the good commit's.
		start := time.Now()
		if t, err := bb.Build(ctx, good.Hash); err == nil {
			runner.ClientBin = t.(bisectTarget).BinDir
		}
		// The engine finds it in the cache; its time counts all the same.
		st.BuildTime += time.Since(start)
		st.Spent += time.Since(start)
	}
	// Progress: a status line before each build and sample, and each
	// decision (verdict, split, skip, check) as it is made.
	shown := len(st.Events)
	endpoints := endpointsJudged(st)
	events := func() {
		for _, e := range engineEvents(st, shown, &endpoints) {
			sink(e)
		}
		shown = len(st.Events)
	}
	bisectBudget(st, sink)
	eng := &bisect.Engine{Builder: bb, Measurer: m, Saver: saver, Machine: a.bisectMachine(ctx), Progress: func(s bisect.Status) {
		events()
		sink(Event{Kind: KindStatus, Bisection: st.ID, Commit: s.Commit.Hash, Done: s.Done, Of: s.Of, Text: s.String()})
	}}
	eng.Guide = bisectGuide{repo: repo, job: bisectProfileJob{Sink: sink, Log: a.log, StateDir: a.opts.StateDir, ID: st.ID,
		Runs: DefaultGuideRuns, Runner: runner, Builder: bb, Options: builder.Options(), Scenario: sc.Native(), Point: point}}.guide
	err = eng.Run(ctx, st)
	events()
	if err != nil {
		return nil, fmt.Errorf("%w (everything measured is saved: resume with 'pgbisect bisect --resume %s')", err, st.ID)
	}

	// Report.
	opts := builder.Options()
	f := finding.FromBisection(st, finding.Report{
		Branch: a.opts.Branch, Env: m.environment(ctx), Settings: bisectSettings(sc, point), Reproduce: bisectReproduce(st),
		Build: finding.BuildInfo{System: bisectSystem(opts), Configure: opts.Configure,
			CFLAGS: opts.CFLAGS, MesonOptions: opts.MesonOptions, ClientBin: runner.ClientBin},
	})
	runs := DefaultProfileRuns
	if req.ProfileRuns != nil {
		runs = *req.ProfileRuns
	}
	bisectProfileJob{Sink: sink, Log: a.log, StateDir: a.opts.StateDir, ID: st.ID, Runs: max(runs, 0), Runner: runner, Builder: bb, Options: opts,
		FramePointers: bisectFramePointers(req.ProfileFramePointers, sink, a.log, repo, a.opts.StateDir, builder), Scenario: sc.Native(), Point: point}.profileCulprits(ctx, f)
	bisectNativeTimes(ctx, sink, runner, bb, sc, metric, point, m.counter(ctx), f)
	f.Reverts = RevertChecks(ctx, sink, RevertInputs{Repo: repo, Builder: builder, Runner: runner, Scenario: sc, Point: point,
		Thresholds: st.Inputs.Thresholds, StateDir: a.opts.StateDir, ID: st.ID, Skip: req.NoRevertCheck}, f)
	var box *store.Store
	var adder notify.Adder
	if !req.report {
		if box, err = a.outbox(ctx, sink); err != nil {
			return nil, err
		}
		adder = box
	}
	dir, err := notify.Publish(ctx, notify.ReportsDir(a.opts.StateDir), f, adder)
	if err != nil {
		return nil, err
	}
	out := &BisectResult{State: st, Finding: f, ReportDir: dir}
	switch {
	case box == nil:
	case req.Post:
		if err := a.post(ctx, box, f.ID, sink); err != nil {
			sink.note("pgbisect bisect: not posted: %v; the finding waits in %s: run 'pgbisect post --pending' to retry", err, a.StoreName())
		}
	default:
		// Kept, but not queued for posting: nobody asked for it.
		if err := results.SettleFinding(ctx, f.ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bisectMachine names the machine a bisection's samples are taken on: the
// machine holding the job's lease in a daemon, Options.Machine otherwise.
// A bisection resumed on another machine restarts its comparisons in
// flight there (bisect.State.Arrive).
func (a *App) bisectMachine(ctx context.Context) string {
	if l, ok := store.LeaseOf(ctx); ok && l.Machine != "" {
		return l.Machine
	}
	if a.opts.Machine != "" {
		return a.opts.Machine
	}
	host, _ := os.Hostname()
	return host
}

// builderFor returns the builder of the repository at source: the App's
// when it is the App's repository, else one of its own (a bisection resumed
// from another repository).
func (a *App) builderFor(ctx context.Context, source string, sink Sink) (*build.Builder, *build.Repo, error) {
	own := a.opts.Repo
	if !build.IsURL(own) {
		if abs, err := filepath.Abs(own); err == nil {
			own = abs
		}
	}
	if source == own {
		return a.Builder(ctx, sink)
	}
	return a.openBuilder(ctx, source, newLineWriter(sink, KindBuildStep))
}

// engineEvents are the App's events for the engine's st.Events[from:]: a
// decision each (the first verdict, the endpoints', as KindEndpoints once
// *endpoints is false), and a KindCulprit after each check that confirmed
// its commit.
func engineEvents(st *bisect.State, from int, endpoints *bool) []Event {
	var out []Event
	for _, e := range st.Events[from:] {
		if k := engineKind(e.Kind); k != "" {
			if k == KindOutcome && st.Curve != nil && searchOf(st, e) != st {
				k = KindVerdict // one point's outcome; the bisection's comes last
			}
			if k == KindVerdict && !*endpoints && endpointsJudged(st) {
				k, *endpoints = KindEndpoints, true
			}
			out = append(out, Event{Kind: k, At: e.Time, Bisection: st.ID, Commit: e.Commit, Text: e.Message})
		}
		if c, ok := confirmedCulprit(st, e); ok {
			out = append(out, Event{Kind: KindCulprit, At: e.Time, Bisection: st.ID, Commit: e.Commit, Text: c})
		}
	}
	return out
}

// confirmedCulprit says, for an engine event that decided a check, whether
// the check confirmed its commit as a culprit (a regression or improvement
// against its parent with fresh samples), and in one line which: the
// milestone a follower shows (a GitHub reply is edited at each).
func confirmedCulprit(st *bisect.State, e bisect.Event) (string, bool) {
	if e.Kind != "check" || e.Commit == "" {
		return "", false
	}
	sub := searchOf(st, e)
	{
		for _, ch := range sub.Checks {
			r := st.Commits[ch.Right]
			// A curve check measures a culprit found at another point; it
			// blames nothing.
			if ch.Curve || r.Hash != e.Commit || (ch.Verdict != bisect.VerdictRegression && ch.Verdict != bisect.VerdictImprovement) {
				continue
			}
			line := fmt.Sprintf("culprit: %s %s (%s", r.Short(), r.Subject, ch.Verdict)
			if ch.Result != nil {
				line += ", " + ch.Result.String()
			}
			if st.Curve != nil {
				line += ", at " + sub.Inputs.Point
			}
			return line + ")", true
		}
	}
	return "", false
}

// searchOf is the search an event of st's log came from: in a bisection
// of several points, the one its Point names (see bisect.State.drain);
// otherwise, and for the bisection's own events, st. Events saved before
// they had a Point name it by their "[POINT] " prefix.
func searchOf(st *bisect.State, e bisect.Event) *bisect.State {
	if st.Curve == nil {
		return st
	}
	for _, sub := range st.Curve.Searches {
		p := sub.Inputs.Point
		if e.Point == p || e.Point == "" && strings.HasPrefix(e.Message, "["+p+"] ") {
			return sub
		}
	}
	return st
}

// endpointsJudged reports whether the endpoints have a verdict, at every
// point of a bisection of several.
func endpointsJudged(st *bisect.State) bool {
	for _, sub := range st.Searches() {
		if len(sub.Pairs) == 0 || sub.Pairs[0].Verdict == bisect.VerdictPending {
			return false
		}
	}
	return true
}

// engineKind maps the bisection engine's event kinds to the App's; the
// engine's "build" events are left out (the builder's events say more).
func engineKind(k string) Kind {
	switch k {
	case "build":
		return ""
	case "broken", "unmeasurable":
		return KindSkip
	case "verdict", "split", "check", "culprit", "outcome", "resume", "guide":
		return Kind(k)
	}
	return KindNote
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
