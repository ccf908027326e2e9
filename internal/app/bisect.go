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
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

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
	if req.Scenario, err = a.scenarioFile(req.Scenario); err != nil {
		return nil, err
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
	// Trailing steps that feed no metric judged or recorded are not run.
	sc, skippedSteps := sc.ForBisection(metric.Name)
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
			if req.Exhaustive {
				st.SetExhaustive()
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
	if req.Exhaustive && !st.Exhaustive && !st.Done() {
		st.SetExhaustive()
		sink.note("--exhaustive: every range beside the culprits is judged from here on")
	}
	if len(skippedSteps) > 0 {
		sink.note("each sample runs the workload steps %s; not run: %s (they feed no metric the bisection judges or records)",
			strings.Join(sc.WorkloadSteps(), ", "), strings.Join(skippedSteps, ", "))
	}

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
		// One pgbench and psql for every run: the good commit's. A good
		// commit that does not build ends the bisection (the engine says
		// so); any other failure stops it here, never leaving each build
		// to run its own pgbench.
		start := time.Now()
		t, err := bb.Build(ctx, good.Hash)
		switch {
		case err == nil:
			runner.ClientBin = t.(bisectTarget).BinDir
		case !errors.Is(err, bisect.ErrBroken):
			return nil, fmt.Errorf("building the good commit %s, whose pgbench and psql every run uses (--client-bin or bench.client_bin names others): %w (everything measured is saved: resume with 'pgbisect bisect --resume %s')",
				build.Short(good.Hash), err, st.ID)
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
		sink(Event{Kind: KindStatus, Bisection: st.ID, Commit: s.Commit.Hash, Done: s.Done, Of: s.Of, Text: s.String(), Short: statusLine(s)})
	}}
	eng.Guide = bisectGuide{repo: repo, job: bisectProfileJob{Sink: sink, Log: a.log, StateDir: a.opts.StateDir, ID: st.ID,
		Runs: DefaultGuideRuns, Runner: runner, Builder: bb, Options: builder.Options(), Scenario: sc.Native(), Point: point}}.guide
	err = eng.Run(ctx, st)
	events()
	if err != nil {
		return nil, fmt.Errorf("%w (everything measured is saved: resume with 'pgbisect bisect --resume %s')", err, st.ID)
	}

	// The answer first: the finding is saved, its report written and, when
	// asked for, posted as soon as the bisection has its answer; the
	// extras (the culprits' profiles and revert checks) follow and update
	// the finding, its report and its post.
	opts := builder.Options()
	env, err := m.environment(ctx)
	if err != nil {
		return nil, err
	}
	counter, err := m.counter(ctx)
	if err != nil {
		return nil, err
	}
	f := finding.FromBisection(st, finding.Report{
		Branch: a.opts.Branch, Env: env, Settings: bisectSettings(sc, point), Reproduce: bisectReproduce(st),
		Build: finding.BuildInfo{System: bisectSystem(opts), Configure: opts.Configure,
			CFLAGS: opts.CFLAGS, MesonOptions: opts.MesonOptions, ClientBin: runner.ClientBin},
	})
	f.Steps, f.StepsSkipped = sc.WorkloadSteps(), skippedSteps
	runs := DefaultProfileRuns
	if req.ProfileRuns != nil {
		runs = *req.ProfileRuns
	}
	// A count's culprits get their native times before the answer: a few
	// runs each, recorded beside the count, not judged.
	bisectNativeTimes(ctx, sink, runner, bb, sc, metric, point, counter, f)
	profiles := bisectProfileJob{Sink: sink, Log: a.log, StateDir: a.opts.StateDir, ID: st.ID, Runs: max(runs, 0), Runner: runner, Builder: bb, Options: opts,
		FramePointers: bisectFramePointers(req.ProfileFramePointers, sink, a.log, repo, a.opts.StateDir, builder), Scenario: sc.Native(), Point: point}
	reverts := RevertInputs{Repo: repo, Builder: builder, Runner: runner, Scenario: sc, Point: point,
		Thresholds: st.Inputs.Thresholds, StateDir: a.opts.StateDir, ID: st.ID, Skip: req.NoRevertCheck}
	var extras func(*finding.Finding)
	if profiles.wanted(f) || reverts.wanted(f) {
		extras = func(f *finding.Finding) {
			profiles.profileCulprits(ctx, f)
			f.Reverts = RevertChecks(ctx, sink, reverts, f)
		}
	}
	dir, err := a.answerFirst(ctx, st, f, req, sink, extras)
	if err != nil {
		return nil, err
	}
	return &BisectResult{State: st, Finding: f, ReportDir: dir}, nil
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

// answerFirst delivers a bisection's answer f before its extras: it saves
// the finding (unless req.report leaves that to the caller), writes its
// report, tells sink (KindAnswer) and, with req.Post, posts it; then it
// runs extras (nil: none), which update f, and saves, writes and, when it
// was posted, edits the post again (notify.Channel.UpdateFinding), so a
// finding is posted once however often it is updated. It returns the
// report's directory.
func (a *App) answerFirst(ctx context.Context, st *bisect.State, f *finding.Finding, req BisectRequest, sink Sink, extras func(*finding.Finding)) (string, error) {
	var box *store.Store
	var adder notify.Adder
	if !req.report {
		var err error
		if box, err = a.Outbox(ctx, sink); err != nil {
			return "", err
		}
		adder = box
	}
	dir, err := notify.Publish(ctx, notify.ReportsDir(a.opts.StateDir), f, adder)
	if err != nil {
		return "", err
	}
	sink.emit(Event{Kind: KindAnswer, Bisection: st.ID, Finding: f.ID, Text: answerText(st, f, dir, extras != nil)})
	if box != nil && !req.Post {
		// Kept, but not queued for posting: nobody asked for it (an
		// update keeps it settled).
		if err := box.SettleFinding(ctx, f.ID); err != nil {
			return "", err
		}
	}
	posted := false
	if box != nil && req.Post {
		if err := a.post(ctx, box, f.ID, sink); err != nil {
			sink.note("pgbisect bisect: not posted: %v; the finding waits in %s: run 'pgbisect post --pending' to retry", err, a.StoreName())
		} else {
			posted = true
		}
	}
	if extras == nil {
		return dir, nil
	}
	extras(f)
	if err := ctx.Err(); err != nil {
		// The answer is saved; the extras run again when the bisection
		// is resumed.
		return "", fmt.Errorf("%w (the answer is saved as finding %s; resume with 'pgbisect bisect --resume %s' for its profiles and revert checks)", err, f.ID, st.ID)
	}
	if dir, err = notify.Publish(ctx, notify.ReportsDir(a.opts.StateDir), f, adder); err != nil {
		return "", err
	}
	sink.note("finding %s updated with its %s", f.ID, extrasDone(f))
	if posted {
		if err := a.updatePost(ctx, box, f.ID, sink); err != nil {
			sink.note("pgbisect bisect: the post was not updated: %v; 'pgbisect post --pending' does not repeat it, 'pgbisect report %s' shows the finding as it is now", err, st.ID)
		}
	}
	return dir, nil
}

// answerText is a bisection's answer as a person watching is shown it,
// before its extras: the outcome, each culprit, where the report is, and
// what follows.
func answerText(st *bisect.State, f *finding.Finding, dir string, extras bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "answer: %s: %s", st.Outcome, st.Summary)
	for i, c := range f.Culprits {
		fmt.Fprintf(&b, "\n  culprit %d: %s %s", i+1, c.Commit.ShortHash(), c.Commit.Subject)
		if len(c.Comparisons) > 0 {
			fmt.Fprintf(&b, " (%+.1f%% against %s)", 100*(c.Comparisons[0].Ratio-1), c.Parent.ShortHash())
		}
	}
	fmt.Fprintf(&b, "\n  finding %s saved: %s", f.ID, filepath.Join(dir, notify.ReportMarkdown))
	if extras {
		b.WriteString("\n  the culprits' profiles and revert checks follow and update it")
	}
	return b.String()
}

// extrasDone names what the extras added to f.
func extrasDone(f *finding.Finding) string {
	var parts []string
	for _, c := range f.Culprits {
		if c.Profile != nil {
			parts = append(parts, "profiles")
			break
		}
	}
	if len(f.Reverts) > 0 {
		parts = append(parts, "revert checks")
	}
	if len(parts) == 0 {
		return "extras (none could be taken)"
	}
	return strings.Join(parts, " and ")
}

// updatePost edits the posts of finding id, recorded in box, to show the
// finding as it is now (notify.Channel.UpdateFinding).
func (a *App) updatePost(ctx context.Context, box *store.Store, id string, sink Sink) error {
	return a.withChannel(ctx, box, id, func(ch notify.Channel, cur finding.Outgoing) error {
		edited, err := ch.UpdateFinding(ctx, cur.Finding, cur.Posts)
		for _, pst := range edited {
			sink.note("updated: %s", PostLine(pst))
		}
		return err
	})
}
