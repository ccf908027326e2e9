package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// fakeSampler gives each target values around its own mean, seeded, and
// counts the samples of each.
type fakeSampler struct {
	mean  map[string]float64
	rng   *rand.Rand
	taken map[string]int
	fail  string // a target whose samples fail
}

func (f *fakeSampler) Run(_ context.Context, _ *Scenario, t Target, _ Point) (*Sample, error) {
	if t.Name == f.fail {
		return nil, errors.New("server crashed")
	}
	f.taken[t.Name]++
	return &Sample{Target: t.Name, Values: map[string]float64{"e": f.mean[t.Name] * (1 + 0.02*f.rng.NormFloat64())}}, nil
}

func TestSequential(t *testing.T) {
	sc, err := Load([]byte("workload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n  - {name: w, step: sql, value: elapsed, record: true}\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	th := stats.Thresholds{Alpha: 0.01, MinEffect: 0.05, MaxSamples: 30}.WithDefaults()
	run := func(meanB float64, fail string) ([]MetricComparison, *fakeSampler, int, error) {
		f := &fakeSampler{mean: map[string]float64{"a": 100, "b": meanB}, rng: rand.New(rand.NewPCG(1, 2)), taken: map[string]int{}, fail: fail}
		looks := 0
		q := &Sequential{Scenario: sc, Targets: [2]Target{{Name: "a"}, {Name: "b"}}, Order: Order{Seed: 7, Targets: 2}, Plan: th,
			Judge: func(Metric) stats.Thresholds { return th },
			Look:  func(n, more int) { looks++ }}
		ms, err := q.Run(context.Background(), f)
		return ms, f, looks, err
	}

	ms, f, _, err := run(130, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Comparison.Verdict != stats.Regression {
		t.Fatalf("30%% slower B: %+v, want a regression on e", ms)
	}
	if f.taken["a"] != f.taken["b"] || f.taken["a"] >= th.MaxSamples || len(ms[0].A) != f.taken["a"] {
		t.Errorf("a clear regression took %v samples, want as many a side and fewer than the budget of %d", f.taken, th.MaxSamples)
	}
	if ms[1].Metric.Name != "w" || !ms[1].Metric.Record {
		t.Errorf("second metric %+v, want the recorded w", ms[1].Metric)
	}

	// A change within the noise and below the smallest effect: more
	// looks, equal samples per side, never past the budget.
	ms, f, looks, err := run(101, "")
	if err != nil {
		t.Fatal(err)
	}
	if looks == 0 || f.taken["a"] != f.taken["b"] || f.taken["a"] > th.MaxSamples || ms[0].Comparison.Verdict == stats.Regression {
		t.Errorf("a 1%% change: %d looks, %v samples, verdict %s", looks, f.taken, ms[0].Comparison.Verdict)
	}

	// A failing sample stops the comparison with the target named.
	_, _, _, err = run(100, "b")
	var se *SampleError
	if !errors.As(err, &se) || se.Target != "b" {
		t.Errorf("failing B: %v, want a SampleError naming b", err)
	}
}

// TestLoop checks the one sampling loop: batches in the shared order
// (stats.Order) continued across looks, a look after each batch with the
// runs so far, no look without Next, and errors from a sample or from
// After stopping it.
func TestLoop(t *testing.T) {
	sc, err := Load([]byte("workload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	targets := []Target{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	order := Order{Seed: 7}
	var sides, looks []int
	f := &fakeSampler{mean: map[string]float64{"a": 1, "b": 1, "c": 1}, rng: rand.New(rand.NewPCG(1, 2)), taken: map[string]int{}}
	l := &Loop{Scenario: sc, Targets: targets, Order: order, First: 3,
		After: func(side int, s *Sample) error {
			if s.Target != targets[side].Name {
				t.Errorf("sample of %s handed over as side %d", s.Target, side)
			}
			sides = append(sides, side)
			return nil
		},
		Next: func(n int) (int, error) {
			looks = append(looks, n)
			if n >= 7 {
				return 0, nil
			}
			return 2, nil
		}}
	n, err := l.Run(context.Background(), f)
	if err != nil || n != 7 {
		t.Fatalf("Run = %d, %v; want 7 runs of each", n, err)
	}
	if want := (Order{Seed: 7, Targets: 3}).Rounds(0, 7); !slices.Equal(sides, want) {
		t.Errorf("sides %v, want the order %v", sides, want)
	}
	if !slices.Equal(looks, []int{3, 5, 7}) {
		t.Errorf("looks at %v runs, want 3 5 7", looks)
	}

	l.Next, sides = nil, nil
	if n, err := l.Run(context.Background(), f); err != nil || n != 3 || len(sides) != 9 {
		t.Errorf("no Next: %d runs, %d samples, %v; want First (3) of each", n, len(sides), err)
	}

	stop := errors.New("stop")
	l.After = func(int, *Sample) error { return stop }
	if _, err := l.Run(context.Background(), f); !errors.Is(err, stop) {
		t.Errorf("After's error: %v", err)
	}
	f.fail = "c"
	l.After = nil
	var se *SampleError
	if _, err := l.Run(context.Background(), f); !errors.As(err, &se) || se.Target != "c" {
		t.Errorf("failing c: %v, want a SampleError naming c", err)
	}
}
