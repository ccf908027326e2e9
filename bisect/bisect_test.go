package bisect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// history builds a SimHistory by hand: n commits, doc-only commits at the
// given indices, culprits with their effects, broken commits.
func history(n int, doc []int, effects map[int]float64, broken []int) *SimHistory {
	h := &SimHistory{Commits: make([]Commit, n), Level: make([]float64, n), Broken: map[int]bool{}}
	owner, level := 0, 1.0
	for i := range n {
		isDoc := slices.Contains(doc, i)
		if !isDoc {
			owner = i
		}
		if e, ok := effects[i]; ok {
			level *= 1 + e
			h.Culprits = append(h.Culprits, i)
		}
		h.Level[i] = level
		h.Commits[i] = Commit{Hash: fmt.Sprintf("%02x%038x", i, i), Subject: fmt.Sprintf("commit %d", i),
			Key: fmt.Sprintf("key%d", owner), NoCompile: isDoc}
	}
	slices.Sort(h.Culprits)
	for _, b := range broken {
		h.Broken[b] = true
	}
	return h
}

// detLab measures deterministically: the j-th sample of a build is the same
// in every run, whatever came before, so a resumed bisection must reproduce
// an uninterrupted one exactly. It counts builds and can cancel a context
// after a number of actions, like a Ctrl-C.
type detLab struct {
	*simLab
	sigma    float64
	taken    map[int]int
	measured []string // keys measured, in order
	stopAt   int      // cancel after this many builds and samples (0: never)
	actions  int
	cancel   context.CancelFunc
}

func newDetLab(h *SimHistory, sigma float64) *detLab {
	return &detLab{simLab: newSimLab(h, stats.NoiseModels[0], sigma, nil), sigma: sigma, taken: map[int]int{}}
}

func (l *detLab) tick() {
	l.actions++
	if l.stopAt > 0 && l.actions >= l.stopAt {
		l.cancel()
	}
}

func (l *detLab) Build(ctx context.Context, hash string) (Target, error) {
	t, err := l.simLab.Build(ctx, hash)
	l.tick()
	return t, err
}

func (l *detLab) Measure(_ context.Context, t Target) (float64, error) {
	i := t.(int)
	j := l.taken[i]
	l.taken[i]++
	f := fnv.New64a()
	fmt.Fprintf(f, "%d/%d", i, j)
	rng := rand.New(rand.NewPCG(f.Sum64(), 7))
	l.measured = append(l.measured, l.h.Commits[i].Key)
	l.tick()
	return 100 * l.h.Level[i] * (1 + l.sigma*rng.NormFloat64()), nil
}

// memSaver keeps the last saved state as JSON, as a file would.
type memSaver struct{ data []byte }

func (m *memSaver) SaveBisection(_ context.Context, s *State) error {
	var err error
	m.data, err = json.Marshal(s)
	return err
}

// testThresholds fit the tests' 3-5% noise and 20-30% effects with small
// budgets, which keep stats' calibration of its boundary cheap.
var testThresholds = stats.Thresholds{Alpha: 0.05, MinEffect: 0.05, MaxSamples: 20}

func runHistory(t *testing.T, h *SimHistory, lab Builder, m Measurer, dir stats.Direction) *State {
	t.Helper()
	in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Metric: "elapsed", Direction: dir,
		Thresholds: testThresholds}
	s, err := NewState(in, h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Engine{Builder: lab, Measurer: m}).Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBisect(t *testing.T) {
	tests := []struct {
		name    string
		h       *SimHistory
		outcome Outcome
		// culprits are the expected candidate lists, worst first.
		culprits [][]int
	}{
		{"single culprit", history(40, []int{3, 7, 20}, map[int]float64{17: 0.20}, nil), OutcomeFound, [][]int{{17}}},
		{"two culprits ranked by effect", history(60, []int{5, 6, 30}, map[int]float64{12: 0.15, 44: 0.30}, nil), OutcomeFound, [][]int{{44}, {12}}},
		{"culprit first after good", history(20, nil, map[int]float64{1: 0.25}, nil), OutcomeFound, [][]int{{1}}},
		{"culprit is the bad commit", history(20, nil, map[int]float64{19: 0.25}, nil), OutcomeFound, [][]int{{19}}},
		{"culprit bordered by broken commits", history(40, []int{22}, map[int]float64{23: 0.25}, []int{20, 21}), OutcomeFound, [][]int{{20, 21, 23}}},
		{"culprit inside a broken stretch", history(40, nil, map[int]float64{21: 0.25}, []int{20, 21, 22}), OutcomeFound, [][]int{{20, 21, 22, 23}}},
		// "no regression" is in TestEndpointMessages.
		{"improvement", history(30, nil, map[int]float64{9: -0.25}, nil), OutcomeImprovement, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lab := newDetLab(tt.h, 0.05)
			s := runHistory(t, tt.h, lab, lab, stats.LowerIsBetter)
			if s.Outcome != tt.outcome {
				t.Fatalf("outcome %s (%s), want %s", s.Outcome, s.Summary, tt.outcome)
			}
			var got [][]int
			for _, c := range s.Culprits {
				got = append(got, c.Candidates)
			}
			if !reflect.DeepEqual(got, tt.culprits) {
				t.Errorf("culprits %v, want %v\n%s", got, tt.culprits, eventLog(s))
			}
			for hash := range lab.builds {
				i := lab.index[hash]
				if tt.h.Commits[i].NoCompile {
					t.Errorf("doc-only commit %d was built", i)
				}
				if lab.builds[hash] > 1 {
					t.Errorf("commit %d built %d times", i, lab.builds[hash])
				}
			}
			for key := range s.Samples {
				if b := s.Builds[key]; b == nil || b.Broken {
					t.Errorf("samples recorded for key %s that was not built", key)
				}
			}
			for _, c := range s.Culprits {
				if c.Result == nil || c.Result.Worse <= 0 || c.Result.NA < testThresholds.FirstLook() {
					t.Errorf("culprit %v lacks its check's evidence: %+v", c.Candidates, c.Result)
				}
				if len(c.Candidates) > 1 && c.Note == "" {
					t.Errorf("range culprit %v has no note saying why", c.Candidates)
				}
			}
			if _, err := json.Marshal(s); err != nil {
				t.Errorf("state does not encode: %v", err)
			}
		})
	}
}

func eventLog(s *State) string {
	var b []byte
	for _, e := range s.Events {
		b = fmt.Appendf(b, "%s: %s\n", e.Kind, e.Message)
	}
	return string(b)
}

func TestBisectHigherIsBetter(t *testing.T) {
	// A throughput metric: the culprit lowers it.
	h := history(30, nil, map[int]float64{11: -0.2}, nil)
	lab := newDetLab(h, 0.05)
	s := runHistory(t, h, lab, lab, stats.HigherIsBetter)
	if s.Outcome != OutcomeFound || len(s.Culprits) != 1 || s.Culprits[0].Candidates[0] != 11 {
		t.Fatalf("got %s %+v\n%s", s.Outcome, s.Culprits, eventLog(s))
	}
	// Every line gives the signed change of the metric (down, for a
	// throughput that fell) with its direction, never the "worse" amount.
	c := s.Culprits[0]
	want := fmt.Sprintf("%s (elapsed %+.1f%%)", h.Commits[11].Short(), 100*(c.Result.Ratio-1))
	if c.Result.Ratio >= 1 || !strings.Contains(s.Summary, want) || !strings.Contains(s.Summary, "higher is better") {
		t.Errorf("summary %q, want it to name %q and say higher is better", s.Summary, want)
	}
	if e := s.Effect(c.Result); !strings.HasPrefix(e, fmt.Sprintf("elapsed %+.1f%% [", 100*(c.Result.Ratio-1))) || !strings.Contains(e, ", higher is better, p=") {
		t.Errorf("effect %q", e)
	}
}

func TestBrokenEndpoint(t *testing.T) {
	h := history(10, nil, map[int]float64{5: 0.2}, []int{9})
	lab := newDetLab(h, 0.05)
	s := runHistory(t, h, lab, lab, stats.LowerIsBetter)
	if s.Outcome != OutcomeBroken {
		t.Fatalf("outcome %s, want %s", s.Outcome, OutcomeBroken)
	}
}

func TestNewStateRejects(t *testing.T) {
	h := history(3, nil, nil, nil)
	bad := slices.Clone(h.Commits)
	bad[2].NoCompile = true // but its key differs from its parent's
	for name, cs := range map[string][]Commit{"one commit": h.Commits[:1], "inconsistent no-compile": bad} {
		if _, err := NewState(Inputs{}, cs, time.Time{}); err == nil {
			t.Errorf("%s: NewState accepted it", name)
		}
	}
}

// TestResumeEverywhere interrupts a bisection after every build and sample
// in turn, reloads the saved state as a new process would, and checks that
// the resumed bisection ends exactly like an uninterrupted one: same
// culprits, same samples, none lost or taken twice.
func TestResumeEverywhere(t *testing.T) {
	h := history(24, []int{4, 13}, map[int]float64{9: 0.3, 18: 0.2}, []int{15})
	ref := newDetLab(h, 0.03)
	want := runHistory(t, h, ref, ref, stats.LowerIsBetter)
	if want.Outcome != OutcomeFound || len(want.Culprits) != 2 {
		t.Fatalf("reference run: %s", want.Summary)
	}
	total := ref.actions
	for stop := 1; stop < total; stop++ {
		lab := newDetLab(h, 0.03)
		got := interruptAndResume(t, want, h, lab, lab, stop)
		if !reflect.DeepEqual(got.Samples, want.Samples) || !reflect.DeepEqual(got.SampleSeq, want.SampleSeq) ||
			!reflect.DeepEqual(got.Culprits, want.Culprits) || !reflect.DeepEqual(got.Checks, want.Checks) ||
			got.SamplesTaken != want.SamplesTaken {
			t.Fatalf("stop %d: resumed bisection differs: %s (%d samples) vs %s (%d samples)", stop, got.Summary, got.SamplesTaken, want.Summary, want.SamplesTaken)
		}
		if !slices.Equal(lab.measured, ref.measured) {
			t.Fatalf("stop %d: a sample was lost or repeated: %d measurements, want %d", stop, len(lab.measured), len(ref.measured))
		}
		if got.BuildsDone != want.BuildsDone {
			t.Fatalf("stop %d: %d builds recorded, want %d", stop, got.BuildsDone, want.BuildsDone)
		}
	}
	t.Logf("interrupted and resumed at each of %d steps", total-1)
}

// interruptAndResume runs a new bisection of want's inputs on lab, cancels
// it at the lab's step stop (d is lab's detLab, which counts the steps),
// then decodes the saved state as a new process would and runs it to the
// end on the same lab, whose build cache and sample history survive. It
// returns the resumed bisection.
func interruptAndResume(t *testing.T, want *State, h *SimHistory, lab interface {
	Builder
	Measurer
}, d *detLab, stop int) *State {
	t.Helper()
	s, err := NewState(want.Inputs, h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stopAt, d.cancel = stop, cancel
	saver := &memSaver{}
	err = (&Engine{Builder: lab, Measurer: lab, Saver: saver}).Run(ctx, s)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stop %d: Run returned %v, want context.Canceled", stop, err)
	}
	got, err := Decode(saver.data)
	if err != nil {
		t.Fatalf("stop %d: %v", stop, err)
	}
	d.stopAt = 0
	if err := (&Engine{Builder: lab, Measurer: lab, Saver: saver}).Run(context.Background(), got); err != nil {
		t.Fatalf("stop %d: resumed Run: %v", stop, err)
	}
	return got
}

// TestDecode: a finished state saved as JSON decodes whole; a damaged one
// is an error saying so.
func TestDecode(t *testing.T) {
	h := history(12, nil, map[int]float64{6: 0.3}, nil)
	lab := newDetLab(h, 0.03)
	s := runHistory(t, h, lab, lab, stats.HigherIsBetter)
	saver := &memSaver{}
	if err := saver.SaveBisection(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(saver.data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Culprits, s.Culprits) || !reflect.DeepEqual(got.Samples, s.Samples) || got.Inputs.Direction != stats.HigherIsBetter {
		t.Errorf("decoded state differs from the saved one")
	}
	got.SampleSeq[s.Commits[0].Key] = nil
	data, _ := json.Marshal(got)
	if _, err := Decode(data); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("decoding a damaged state: %v", err)
	}
}

// TestNextSideInterleaves checks the order of a comparison's samples: A B B A
// blocks with side A first under seed 0 (states saved before seeds), and
// under a seed blocks that start on either side about equally often, always
// with equal counts after every two samples.
func TestNextSideInterleaves(t *testing.T) {
	order := func(seed uint64, target int) string {
		var order []byte
		na, nb := 0, 0
		for {
			side := nextSide(na, nb, target, seed)
			if side < 0 {
				break
			}
			if side == 0 {
				na++
				order = append(order, 'A')
			} else {
				nb++
				order = append(order, 'B')
			}
			if len(order)%2 == 0 && na != nb {
				t.Fatalf("seed %d: counts %d and %d after %s", seed, na, nb, order)
			}
		}
		return string(order)
	}
	if got := order(0, 4); got != "ABBAABBA" {
		t.Errorf("seed 0: order %s, want ABBAABBA", got)
	}
	aFirst, blocks := 0, 0
	for seed := uint64(1); seed <= 50; seed++ {
		o := order(stats.Mix64(seed)|1, 20)
		if o != order(stats.Mix64(seed)|1, 20) {
			t.Fatalf("seed %d: the order is not a function of the seed", seed)
		}
		// The planner samples in the one order of every comparison
		// (stats.Order, which bench's sampling loop runs).
		var shared []byte
		for _, side := range (stats.Order{Seed: stats.Mix64(seed) | 1, Targets: 2}).Rounds(0, 20) {
			shared = append(shared, "AB"[side])
		}
		if o != string(shared) {
			t.Fatalf("seed %d: the planner samples %s, stats.Order %s", seed, o, shared)
		}
		for b := 0; b < len(o); b += 4 {
			blocks++
			switch o[b : b+4] {
			case "ABBA":
				aFirst++
			case "BAAB":
			default:
				t.Fatalf("seed %d: block %s in %s", seed, o[b:b+4], o)
			}
		}
	}
	if aFirst < blocks*4/10 || aFirst > blocks*6/10 {
		t.Errorf("side A starts %d of %d blocks, want about half", aFirst, blocks)
	}
	// A resumed comparison continues from its counts: after an uneven
	// split (samples shared with an earlier comparison) the side with
	// fewer samples comes first.
	if nextSide(3, 1, 5, 7) != 1 || nextSide(5, 2, 5, 7) != 1 {
		t.Error("the side with fewer samples must come first")
	}
}

func TestIDStable(t *testing.T) {
	in := Inputs{Repo: "r", Good: "a", Bad: "b", Metric: "elapsed"}
	if ID(in) != ID(in) || ID(in) == ID(Inputs{Repo: "r", Good: "a", Bad: "c", Metric: "elapsed"}) {
		t.Error("ID is not a stable function of the inputs")
	}
	s, _ := NewState(in, history(3, nil, nil, nil).Commits, time.Time{})
	if s.ID != ID(in) {
		t.Error("NewState's ID differs from ID(inputs)")
	}
}

// stepLab is a detLab on a machine that becomes slower, for good, after
// a number of samples: another job arrives and stays.
type stepLab struct {
	*detLab
	after int     // samples before the step
	slow  float64 // e.g. 0.3: every run 30% slower after it
	n     int
}

func (l *stepLab) Measure(ctx context.Context, t Target) (float64, error) {
	v, err := l.detLab.Measure(ctx, t)
	l.n++
	if l.n > l.after {
		v *= 1 + l.slow
	}
	return v, err
}

// TestDriftDoesNotConfound bisects on a machine that turns 30% slower
// during the search. Comparisons on fresh interleaved samples find the
// culprit with no phantom verdict (a regression or improvement between
// commits of equal true level); reusing the samples taken before the step
// (Window 0, the old behaviour) is misled by it.
func TestDriftDoesNotConfound(t *testing.T) {
	h := history(64, []int{5, 30}, map[int]float64{41: 0.2}, nil)
	for _, window := range []int{DefaultWindow, 0} {
		lab := &stepLab{detLab: newDetLab(h, 0.03), after: 40, slow: 0.3}
		in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Metric: "elapsed",
			Direction: stats.LowerIsBetter, Thresholds: testThresholds}
		s, err := NewState(in, h.Commits, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		s.Window = window
		if err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		phantoms := 0
		for _, p := range s.Pairs {
			if (p.Verdict == VerdictRegression || p.Verdict == VerdictImprovement) && h.Level[p.Left] == h.Level[p.Right] {
				phantoms++
			}
		}
		exact := s.Outcome == OutcomeFound && len(s.Culprits) == 1 && slices.Equal(s.Culprits[0].Candidates, []int{41})
		if window == DefaultWindow && (!exact || phantoms > 0) {
			t.Errorf("window %d: %s, %d phantom verdicts; want culprit 41 and none\n%s", window, s.Summary, phantoms, eventLog(s))
		}
		if window == 0 && phantoms == 0 {
			t.Errorf("window 0 (every sample reused) saw no phantom despite the step: the test no longer shows drift\n%s", eventLog(s))
		}
	}
}

// TestResumeOldState resumes states saved before sample times, windows,
// plans and per-comparison counts existed (no sample_seq, window, from,
// plan or taken): they decode, and the bisection continues as it began,
// reusing every sample and judging both halves of every split (Plan 0),
// exactly like an uninterrupted run of the old behaviour.
func TestResumeOldState(t *testing.T) {
	h := history(24, []int{4, 13}, map[int]float64{9: 0.3, 18: 0.2}, []int{15})
	run := func(s *State, lab *detLab, saver Saver, ctx context.Context) error {
		return (&Engine{Builder: lab, Measurer: lab, Saver: saver}).Run(ctx, s)
	}
	in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Metric: "elapsed",
		Direction: stats.LowerIsBetter, Thresholds: testThresholds}
	want, _ := NewState(in, h.Commits, time.Time{})
	want.Window, want.Plan = 0, 0
	ref := newDetLab(h, 0.03)
	if err := run(want, ref, nil, context.Background()); err != nil || want.Outcome != OutcomeFound {
		t.Fatalf("reference run: %v %s", err, want.Summary)
	}
	for _, stop := range []int{ref.actions / 3, 2 * ref.actions / 3} {
		s, _ := NewState(in, h.Commits, time.Time{})
		s.Window, s.Plan = 0, 0
		lab := newDetLab(h, 0.03)
		ctx, cancel := context.WithCancel(context.Background())
		lab.stopAt, lab.cancel = stop, cancel
		saver := &memSaver{}
		if err := run(s, lab, saver, ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("stop %d: Run returned %v", stop, err)
		}
		cancel()
		// Remove what older versions did not write.
		var raw map[string]any
		if err := json.Unmarshal(saver.data, &raw); err != nil {
			t.Fatal(err)
		}
		delete(raw, "sample_seq")
		delete(raw, "window")
		raw["inputs"].(map[string]any)["direction"] = 0 // before there was one Direction type
		for _, p := range raw["pairs"].([]any) {
			delete(p.(map[string]any), "from")
			delete(p.(map[string]any), "taken")
		}
		old, _ := json.Marshal(raw)
		if strings.Contains(string(old), "sample_seq") || strings.Contains(string(old), `"from"`) ||
			strings.Contains(string(old), `"plan"`) || strings.Contains(string(old), `"taken"`) {
			t.Fatal("the old state still holds new fields")
		}
		got, err := Decode(old)
		if err != nil {
			t.Fatalf("stop %d: decoding an old state: %v", stop, err)
		}
		lab.stopAt = 0
		if err := run(got, lab, nil, context.Background()); err != nil {
			t.Fatalf("stop %d: resumed Run: %v", stop, err)
		}
		if !reflect.DeepEqual(got.Samples, want.Samples) || !reflect.DeepEqual(got.Culprits, want.Culprits) || got.SamplesTaken != want.SamplesTaken {
			t.Fatalf("stop %d: resumed old state differs: %s (%d samples) vs %s (%d samples)", stop, got.Summary, got.SamplesTaken, want.Summary, want.SamplesTaken)
		}
		// The samples taken before the resume cannot be split by
		// comparison; those after it can, and all are accounted for.
		sp := got.Spend()
		if sp.Total() != got.SamplesTaken || sp.Unsplit == 0 || sp.Unsplit >= got.SamplesTaken || sp.Checks == 0 {
			t.Fatalf("stop %d: spend of a resumed old state: %+v, %d samples taken", stop, sp, got.SamplesTaken)
		}
	}
}

// TestEndpointMessages checks that "no regression reproduced" is said only
// on an equivalence verdict, and that endpoints the budget cannot decide
// say so, with the interval and what to do.
func TestEndpointMessages(t *testing.T) {
	tests := []struct {
		name    string
		h       *SimHistory
		sigma   float64
		outcome Outcome
		want    []string
	}{
		{"same", history(30, []int{4}, nil, nil), 0.03, OutcomeNoRegression,
			[]string{"no regression reproduced: ", "is within ±5% of", "(same, "}},
		{"too noisy for the budget", history(30, nil, map[int]float64{12: -0.04}, nil), 0.10, OutcomeNotShown,
			[]string{"could not show a regression within the budget: ", "(inconclusive, ", "], p=",
				"--max-samples or stats.max_samples, now 20 per side", "--set rows="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lab := newDetLab(tt.h, tt.sigma)
			s := runHistory(t, tt.h, lab, lab, stats.LowerIsBetter)
			if s.Outcome != tt.outcome {
				t.Fatalf("outcome %s (%s), want %s", s.Outcome, s.Summary, tt.outcome)
			}
			for _, w := range tt.want {
				if !strings.Contains(s.Summary, w) {
					t.Errorf("summary %q lacks %q", s.Summary, w)
				}
			}
			if tt.outcome != OutcomeNoRegression && strings.Contains(s.Summary, "no regression") {
				t.Errorf("summary %q claims no regression without an equivalence verdict", s.Summary)
			}
			t.Log(s.Summary)
		})
	}
}

// TestSpend checks that every sample of a bisection is accounted for once,
// by phase and by verdict, and that the plan of new states (one
// comparison per split, deferred halves judged merged at the end) spends
// fewer samples than judging both halves of every split, for the same
// culprits.
func TestSpend(t *testing.T) {
	h := history(60, []int{5, 6, 30}, map[int]float64{12: 0.15, 44: 0.30}, nil)
	run := func(plan int) *State {
		lab := newDetLab(h, 0.05)
		in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Metric: "elapsed",
			Direction: stats.LowerIsBetter, Thresholds: testThresholds}
		s, err := NewState(in, h.Commits, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		s.Plan = plan
		if err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var culprits [2][][]int
	var spent [2]int
	for plan := range 2 {
		s := run(plan)
		sp := s.Spend()
		if sp.Unsplit != 0 || sp.Total() != s.SamplesTaken || sp.Endpoints == 0 || sp.Search == 0 || sp.Checks == 0 {
			t.Errorf("plan %d: phases %+v do not add up to %d samples", plan, sp, s.SamplesTaken)
		}
		if v := sp.Regression + sp.Same + sp.Smaller + sp.Improvement + sp.Undecided; v != s.SamplesTaken {
			t.Errorf("plan %d: verdicts %+v add up to %d, not %d samples", plan, sp, v, s.SamplesTaken)
		}
		for _, c := range s.Culprits {
			culprits[plan] = append(culprits[plan], c.Candidates)
		}
		spent[plan] = s.SamplesTaken
		if plan == 1 {
			// The culprit in the newer half of the first split is found
			// through a merged pair of deferred halves.
			var merged, inferred, smaller bool
			for _, p := range s.Pairs {
				merged = merged || (p.Merged && p.Verdict == VerdictRegression)
				inferred = inferred || p.Inferred
				smaller = smaller || p.Verdict == VerdictSmaller
			}
			if !merged || !inferred || !smaller {
				t.Errorf("plan 1: a merged pair regressed %v, a pair inferred %v, a half smaller %v; want all\n%s", merged, inferred, smaller, eventLog(s))
			}
		}
		if ev := s.Events[len(s.Events)-1]; ev.Kind != "spend" || !strings.HasPrefix(ev.Message, fmt.Sprintf("%d samples: endpoints %d, search %d, checks %d", s.SamplesTaken, sp.Endpoints, sp.Search, sp.Checks)) {
			t.Errorf("plan %d: the last event says %q, want where the samples went: %s", plan, ev.Message, sp)
		}
	}
	if want := [][]int{{44}, {12}}; !reflect.DeepEqual(culprits[0], want) || !reflect.DeepEqual(culprits[1], want) {
		t.Errorf("culprits %v (plan 0) and %v (plan 1), want %v", culprits[0], culprits[1], want)
	}
	if spent[1] >= spent[0] {
		t.Errorf("plan 1 took %d samples, plan 0 %d", spent[1], spent[0])
	}
	t.Logf("samples: plan 0 %d, plan 1 %d", spent[0], spent[1])
}
