package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fixture is what seed stored: a nightly series with a 15% drop at night
// Step, the finding that blamed the commit of that night, a finished
// bisection, a running and a queued job, and a machine.
type fixture struct {
	Scenario, Metric, Point, Branch string
	Host                            string
	Nights                          []store.NightlyRun
	Step                            int
	FindingID                       string
	IssueURL                        string
	BisectionID                     string
	Culprit                         string // the bisection's true culprit
	Running, Queued                 int64
	// Machine runs the running job; Idle is a machine that stopped.
	Machine, Idle string
	// RunningEvents names the running job's event stream.
	RunningEvents string
	// FlameGraph is the path of the finding's flame graph.
	FlameGraph string
	// Requester asked for the queued job.
	Requester string
}

const fixtureNights = 16

// hash makes a distinct 40-digit commit hash.
func hash(prefix uint32, i int) string { return fmt.Sprintf("%02x%08x%030x", i, prefix, i) }

// seed stores the fixture under names made from name, so tests sharing the
// package's store keep apart.
func seed(t *testing.T, st *store.Store, name string) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{Scenario: "copy-" + name, Metric: "tps", Point: "clients=4", Branch: "master-" + name,
		Host: "bench-" + name, Step: 10}
	env, err := st.Environment(ctx, json.RawMessage(fmt.Sprintf(`{"host": %q, "cpu": "Test CPU", "cores": 2}`, f.Host)))
	if err != nil {
		t.Fatal(err)
	}
	prefix := uint32(len(name))<<24 | uint32(time.Now().UnixNano()&0xffffff)
	base := time.Date(2026, 1, 1, 2, 15, 0, 0, time.UTC)
	for i := range fixtureNights {
		c := hash(prefix, i)
		n := store.NightlyRun{Branch: f.Branch, Commit: c, Status: "ok", Started: base.Add(time.Duration(i) * 24 * time.Hour)}
		n.Finished = n.Started.Add(time.Hour)
		if err := st.RecordNightly(ctx, &n); err != nil {
			t.Fatal(err)
		}
		key := "key-" + c
		// An ok build has no log path (the builder records one only for a
		// failure); this one came from ccache.
		if err := st.RecordBuild(ctx, store.Build{Key: key, Commit: c, Status: "ok", Duration: 10764147 * time.Microsecond,
			Time: n.Started}); err != nil {
			t.Fatal(err)
		}
		level := 1000.0
		if i >= f.Step {
			level = 850
		}
		var ss []store.Sample
		for k := range 5 {
			ss = append(ss, store.Sample{BuildKey: key, Commit: c, Scenario: f.Scenario, Point: f.Point, Metric: f.Metric,
				Value: level * (1 + 0.004*float64((i*7+k*3)%5-2)), Index: k, Time: n.Started.Add(time.Duration(k) * time.Minute),
				EnvironmentID: env, NightlyID: n.ID})
		}
		if i == f.Step { // a count, of a series no other night has
			ss = append(ss, store.Sample{BuildKey: key, Commit: c, Scenario: f.Scenario, Point: f.Point, Metric: "rows",
				Value: 300000, Time: n.Started, EnvironmentID: env, NightlyID: n.ID})
		}
		if err := st.AddSamples(ctx, ss); err != nil {
			t.Fatal(err)
		}
		f.Nights = append(f.Nights, n)
	}

	good, bad := f.Nights[f.Step-1], f.Nights[f.Step]
	nf := &finding.Finding{
		ID: finding.NewID(bad.Started.Add(2*time.Hour), f.Scenario, bad.Commit), Kind: finding.Regression,
		Branch: f.Branch, Scenario: f.Scenario, Metric: f.Metric, Unit: "tps", Direction: stats.HigherIsBetter, Point: f.Point,
		Good: finding.Commit{Hash: good.Commit, Subject: "Good commit"}, Bad: finding.Commit{Hash: bad.Commit, Subject: "Make COPY slower"},
		Culprits: []finding.Culprit{{Commit: finding.Commit{Hash: bad.Commit, Subject: "Make COPY slower", Author: "A Hacker <a@example.org>"},
			Parent: finding.Commit{Hash: good.Commit}, Verified: true,
			Profile: &finding.Profile{Point: f.Point, ParentRuns: 5, CulpritRuns: 5, MinP: 0.008, FramePointers: true,
				Self:       []finding.FunctionShare{{Function: "NextCopyFrom", Parent: 0.10, Culprit: 0.14, Change: 0.04, P: 0.008}},
				FlameGraph: "flame-" + bad.Commit[:10] + ".svg"},
			Comparisons: []finding.Comparison{{Metric: f.Metric, Unit: "tps", Direction: stats.HigherIsBetter, Point: f.Point,
				Good: finding.Side{Median: 1000, RelStddev: 0.004, N: 5}, Bad: finding.Side{Median: 850, RelStddev: 0.004, N: 5},
				Ratio: 0.85, RatioLow: 0.84, RatioHigh: 0.86, Confidence: 0.95, P: 0.0001, Verdict: "regression"}}}},
		Log: []finding.Step{
			{Commit: finding.Commit{Hash: good.Commit}, Verdict: finding.StepGood, Median: 1000, N: 5, Samples: []float64{998, 1000, 1002, 1001, 999}, Order: 0},
			{Commit: finding.Commit{Hash: bad.Commit}, Verdict: finding.StepBad, Median: 850, N: 5, Samples: []float64{851, 850, 849, 852, 848}, Order: 1},
		},
		Env:     finding.Environment{Host: f.Host, CPU: "Test CPU", Cores: 2},
		Started: bad.Started, Finished: bad.Finished, Builds: 2, Samples: 10,
	}
	nf.Series = &finding.Series{Metric: f.Metric, Unit: "tps", Point: f.Point}
	for i, n := range f.Nights {
		m := 1000.0
		if i >= f.Step {
			m = 850
		}
		nf.Series.Points = append(nf.Series.Points, finding.SeriesPoint{At: n.Started, Commit: n.Commit[:10], Median: m})
	}
	// Published as a bisection publishes it: the report written with its
	// flame graph, which the store keeps.
	reports := t.TempDir()
	if err := os.MkdirAll(filepath.Join(reports, nf.ID), 0o755); err != nil {
		t.Fatal(err)
	}
	f.FlameGraph = fmt.Sprintf("/findings/%s/plots/%s", nf.ID, nf.Culprits[0].Profile.FlameGraph)
	if err := os.WriteFile(filepath.Join(reports, nf.ID, nf.Culprits[0].Profile.FlameGraph),
		[]byte(`<svg xmlns="http://www.w3.org/2000/svg" width="100" height="20"><rect width="100" height="20" fill="#d62728"/></svg>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := notify.Publish(ctx, reports, nf, st); err != nil {
		t.Fatal(err)
	}
	report, err := finding.Marshal(nf)
	if err != nil {
		t.Fatal(err)
	}
	f.FindingID = nf.ID
	if err := st.SaveFinding(ctx, store.Finding{ID: nf.ID, Kind: string(nf.Kind), Branch: f.Branch, Culprits: []string{bad.Commit},
		Scenario: f.Scenario, Point: f.Point, Metric: f.Metric, Ratio: 0.85, RatioLow: 0.84, RatioHigh: 0.86, P: 0.0001, N: 5,
		Report: report, Time: bad.Started.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	f.IssueURL = "https://github.com/example/postgres/issues/4" + fmt.Sprint(len(name))
	if err := st.MarkPosted(ctx, nf.ID, finding.Post{Key: "culprit", Action: "created", Repo: "example/postgres",
		Issue: 40 + len(name), URL: f.IssueURL}); err != nil {
		t.Fatal(err)
	}

	// Jobs of a class of their own, which no daemon of these tests takes;
	// the first is made running as a worker would.
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	class := "web-" + strings.ToLower(name)
	running, err := queue.Enqueue(ctx, app.BisectRequest{Scenario: "copy.yaml", Good: "v1", Bad: "v2"}, class)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY[$2] WHERE id = $1",
		running.ID, "worker-"+strings.ToLower(name)); err != nil {
		t.Fatal(err)
	}
	var c jobs.Common
	if err := json.Unmarshal(running.EncodedArgs, &c); err != nil {
		t.Fatal(err)
	}
	f.Running, f.RunningEvents = running.ID, jobs.EventsOf(c.Key)
	f.Machine, f.Idle = "worker-"+strings.ToLower(name), "idle-"+strings.ToLower(name)
	for _, m := range []string{f.Machine, f.Idle} {
		if err := st.JoinMachine(ctx, store.Machine{Name: m, Class: class, PID: 4242}, time.Minute, func(int) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Heartbeat(ctx, f.Machine, c.Key); err != nil {
		t.Fatal(err)
	}
	if err := st.LeaveMachine(ctx, f.Idle); err != nil {
		t.Fatal(err)
	}
	// Queued by an older pgbisect, with the scenario's path on the server.
	f.Requester = "hacker@" + strings.ToLower(name)
	queued, err := queue.Enqueue(ctx, app.BisectRequest{Scenario: "/srv/pgbisect/scenarios/copy-" + name + ".yaml", Good: "v2", Bad: "v3",
		Metric: "copy_time", Point: "clients=4", Requester: f.Requester}, class)
	if err != nil {
		t.Fatal(err)
	}
	f.Queued = queued.ID

	b := newSimBisection(t, st, name, 0)
	if err := b.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.BisectionID, f.Culprit = b.state.ID, b.culprit()
	return f
}

// simBisection is a real bisection (package bisect's engine, saved to the
// results store by store/bisections, its progress appended to the job's
// event stream) over a simulated history, so no PostgreSQL is built.
type simBisection struct {
	st    *store.Store
	hist  *bisect.SimHistory
	state *bisect.State
	rng   *rand.Rand
	index map[string]int

	// pauseAt, when > 0, makes the pauseAt-th sample wait for resume after
	// closing paused.
	pauseAt        int
	taken          int
	paused, resume chan struct{}
	once           sync.Once
}

func newSimBisection(t *testing.T, st *store.Store, name string, pauseAt int) *simBisection {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(len(name)), 7))
	h := bisect.NewSimHistory(bisect.SimConfig{Commits: 24, Culprits: 1, Effect: 0.25, DocFraction: 0.1}, rng)
	// Distinct hashes per bisection: the id is derived from the inputs.
	salt := uint32(time.Now().UnixNano() & 0xffffffff)
	for i := range h.Commits {
		h.Commits[i].Hash = hash(salt, i)
		h.Commits[i].Subject = fmt.Sprintf("%s: change %d", name, i)
	}
	in := bisect.Inputs{Repo: "sim", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash,
		Scenario: "scenarios/copy-" + name + ".yaml", Metric: "elapsed", Unit: "s", Direction: stats.LowerIsBetter}
	s, err := bisect.NewState(in, h.Commits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := &simBisection{st: st, hist: h, state: s, rng: rng, index: map[string]int{}, pauseAt: pauseAt,
		paused: make(chan struct{}), resume: make(chan struct{})}
	for i, c := range h.Commits {
		b.index[c.Hash] = i
	}
	return b
}

func (b *simBisection) culprit() string { return b.hist.Commits[b.hist.Culprits[0]].Hash }

func (b *simBisection) Build(_ context.Context, hash string) (bisect.Target, error) {
	return b.index[hash], nil
}

func (b *simBisection) Measure(ctx context.Context, t bisect.Target) (float64, error) {
	b.taken++
	if b.pauseAt > 0 && b.taken == b.pauseAt {
		close(b.paused)
		select {
		case <-b.resume:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	v := 10 * b.hist.Level[t.(int)] * (1 + 0.02*b.rng.NormFloat64())
	// Stored as a bisection's measurer stores its samples, so the
	// commit's page lists it.
	c, in := b.hist.Commits[t.(int)].Hash, b.state.Inputs
	err := b.st.AddSamples(ctx, []store.Sample{{BuildKey: "sim-" + c, Commit: c, Scenario: scenarioName(in.Scenario), Metric: in.Metric,
		Value: v, Index: b.taken, BisectionID: b.state.ID, Seq: b.state.SamplesTaken}})
	return v, err
}

// eventSaver saves the state and appends a "saved" event to the job's
// stream, as a bisection job does.
type eventSaver struct{ db *store.Store }

func (e eventSaver) SaveBisection(ctx context.Context, s *bisect.State) error {
	if err := e.db.SaveBisection(ctx, s); err != nil {
		return err
	}
	payload, _ := json.Marshal(map[string]any{"phase": s.Phase, "builds": s.BuildsDone, "samples": s.SamplesTaken})
	_, err := e.db.AppendEvent(ctx, s.ID, "saved", payload)
	return err
}

// run runs the bisection to its end, which it marks with a "done" event
// as a bisection job does (app.Bisect).
func (b *simBisection) run(ctx context.Context) error {
	e := &bisect.Engine{Builder: b, Measurer: b, Saver: eventSaver{b.st}}
	if err := e.Run(ctx, b.state); err != nil {
		return err
	}
	payload, _ := json.Marshal(app.Event{Kind: app.KindDone, At: time.Now(), Bisection: b.state.ID})
	_, err := b.st.AppendEvent(ctx, b.state.ID, string(app.KindDone), payload)
	return err
}
