package bisect

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// guidedLab is a simulated history and a profile-guided state over it.
func guidedLab(t *testing.T, seed uint64) (*State, *SimHistory, *simLab) {
	t.Helper()
	cfg := SimConfig{Commits: 80, Culprits: 1, Effect: 0.30, Sigma: 0.03}.withDefaults()
	rng := rand.New(rand.NewPCG(seed, 1))
	h := NewSimHistory(cfg, rng)
	noise, err := stats.NoiseModelNamed(cfg.Noise)
	if err != nil {
		t.Fatal(err)
	}
	in := Inputs{Repo: "sim", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Scenario: "sim", Metric: "elapsed", Direction: stats.LowerIsBetter}
	s, err := NewState(in, h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	s.Guide = &Guide{}
	return s, h, newSimLab(h, noise, cfg.Sigma, rng)
}

// TestGuideAfterEndpoints: the profile is asked for once, after the
// endpoints are judged a regression and before the first split; a right
// hint names the culprit with fewer builds than plain bisection, and the
// log says what the profile pointed at.
func TestGuideAfterEndpoints(t *testing.T) {
	s, h, lab := guidedLab(t, 3)
	calls := 0
	e := &Engine{Builder: lab, Measurer: lab, Now: func() time.Time { return time.Time{} },
		Guide: func(_ context.Context, s *State) (Guide, error) {
			calls++
			if s.Phase != PhaseSearch || s.Pairs[0].Verdict != VerdictRegression || len(s.Points) != 2 {
				t.Errorf("guide asked for in phase %s, endpoints %q, points %v", s.Phase, s.Pairs[0].Verdict, s.Points)
			}
			return Guide{Runs: 6, Pointers: []GuidePointer{
				{Function: "NextCopyFrom", Change: 0.42, Files: []string{"copyfromparse.c"}, Commits: []int{h.Culprits[0], 0, len(s.Commits)}},
				{Function: "memcpy", Change: 0.02},
			}}, nil
		}}
	if err := e.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || !s.Guide.Done || !slices.Equal(s.Hints, h.Culprits) {
		t.Fatalf("guide called %d times, %+v, hints %v; want once, the culprit %v (out-of-range commits dropped)", calls, s.Guide, s.Hints, h.Culprits)
	}
	run := score(s, h)
	if !run.Exact || run.Samples != s.SamplesTaken+6 {
		t.Errorf("guided run %+v: want the culprit named exactly, the profiled runs counted", run)
	}
	var lines []string
	for _, ev := range s.Events {
		if ev.Kind == "guide" {
			lines = append(lines, ev.Message)
		}
	}
	want := "profile points at NextCopyFrom (copyfromparse.c, self share +42.0 points): 1 commit touches it: " + s.Commits[h.Culprits[0]].Short()
	if len(lines) != 3 || lines[0] != want || !strings.Contains(lines[1], "memcpy (defined in no file the range changes") ||
		!strings.Contains(lines[2], "1 of") {
		t.Errorf("guide log:\n%s\nwant first: %s", strings.Join(lines, "\n"), want)
	}
	if g := s.GuideSummary(); !strings.HasPrefix(g, "profile-guided search: profile points at NextCopyFrom") || strings.Contains(g, "memcpy") {
		t.Errorf("summary %q", g)
	}

	plain, _, lab2 := guidedLab(t, 3)
	plain.Guide = nil
	if err := (&Engine{Builder: lab2, Measurer: lab2, Now: e.Now}).Run(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	if !score(plain, h).Exact || plain.BuildsDone <= s.BuildsDone {
		t.Errorf("plain bisection %d builds, guided %d: want the guided one to need fewer", plain.BuildsDone, s.BuildsDone)
	}
}

// TestGuideResumes: a bisection interrupted while profiling asks again
// when it resumes from its saved state; a profile that fails leaves a
// note and a plain search; an engine without a profiler says so.
func TestGuideResumes(t *testing.T) {
	s, h, lab := guidedLab(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	var saved []byte
	saver := guideSaver(func(s *State) error {
		var err error
		saved, err = json.Marshal(s)
		return err
	})
	e := &Engine{Builder: lab, Measurer: lab, Saver: saver, Now: func() time.Time { return time.Time{} },
		Guide: func(ctx context.Context, _ *State) (Guide, error) {
			cancel()
			return Guide{}, ctx.Err()
		}}
	if err := e.Run(ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted while profiling: %v", err)
	}
	back, err := Decode(saved)
	if err != nil {
		t.Fatal(err)
	}
	if back.Guide == nil || back.Guide.Done {
		t.Fatalf("saved state: guide %+v; want the profile still to be taken", back.Guide)
	}
	if act := back.Next(time.Time{}); act.Kind != ActGuide {
		t.Fatalf("resumed state's next action %+v, want ActGuide", act)
	}
	e.Guide = func(context.Context, *State) (Guide, error) { return Guide{}, errors.New("perf not found") }
	if err := e.Run(context.Background(), back); err != nil {
		t.Fatal(err)
	}
	if !back.Guide.Done || back.Guide.Note != "no profile: perf not found" || len(back.Hints) > 0 || !score(back, h).Exact {
		t.Errorf("failed profile: guide %+v, hints %v, %+v", back.Guide, back.Hints, score(back, h))
	}
	if g := back.GuideSummary(); g != "profile-guided search: plain bisection (no profile: perf not found)" {
		t.Errorf("summary %q", g)
	}

	s, _, lab = guidedLab(t, 5)
	if err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !s.Guide.Done || s.Guide.Note != "this engine has no profiler" {
		t.Errorf("engine without Guide: %+v", s.Guide)
	}
}

// TestGuideOldStates: a state saved before profile-guided search existed
// (no "guide") decodes without one and never asks for a profile.
func TestGuideOldStates(t *testing.T) {
	s, _, lab := guidedLab(t, 7)
	s.Guide = nil
	e := &Engine{Builder: lab, Measurer: lab, Now: func() time.Time { return time.Time{} },
		Guide: func(context.Context, *State) (Guide, error) {
			t.Error("a state without a guide asked for a profile")
			return Guide{}, nil
		}}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"guide"`) || strings.Contains(string(data), `"hints"`) {
		t.Fatalf("an unguided state encodes a guide: %s", data)
	}
	old, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if old.Guide != nil || old.GuideSummary() != "" {
		t.Errorf("old state got a guide: %+v", old.Guide)
	}
}

type guideSaver func(*State) error

func (f guideSaver) SaveBisection(_ context.Context, s *State) error { return f(s) }
