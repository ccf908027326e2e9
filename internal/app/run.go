package app

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
)

// RunResult is what measuring one build found (the JSON of 'pgbisect run
// --json').
type RunResult struct {
	Scenario string            `json:"scenario"`
	File     string            `json:"file"`
	Target   string            `json:"target"`
	BinDir   string            `json:"bindir"`
	Samples  int               `json:"samples_per_point"`
	Vars     map[string]string `json:"variables"`
	Points   []RunPointResult  `json:"points"`
}

// RunPointResult is one matrix point's samples and their summaries.
type RunPointResult struct {
	Point   string            `json:"point"`
	Metrics []RunMetricResult `json:"metrics"`
	Samples []bench.Sample    `json:"samples"`
}

// RunMetricResult summarises one metric at one point.
type RunMetricResult struct {
	Name    string        `json:"name"`
	Unit    string        `json:"unit"`
	Better  string        `json:"better"`
	Summary stats.Summary `json:"summary"`
	Values  []float64     `json:"values"`
	// Bimodal is set when the values form two separate groups (see
	// stats.Bimodal): a noise that more samples do not average out.
	Bimodal bool `json:"bimodal,omitempty"`
}

// Run measures one build (a revision, built or found in the cache, or an
// installation) with a scenario: req.Samples samples per matrix point.
func (a *App) Run(ctx context.Context, req RunRequest, sink Sink) (*RunResult, error) {
	if req.Samples < 1 {
		return nil, badRequest("--samples must be 1 or more")
	}
	if (req.Rev == "") == (req.BinDir == "") {
		return nil, badRequest("give one REV to build, or --bindir DIR to measure an existing installation")
	}
	file, err := a.scenarioFile(req.Scenario)
	if err != nil {
		return nil, err
	}
	sc, err := bench.LoadFileWith(file, req.Set)
	if err != nil {
		return nil, err
	}
	if req.CPUs != "" {
		if sc.CPUs, err = bench.ParseCPUSpec(req.CPUs); err != nil {
			return nil, badRequest("--cpus: %v", err)
		}
	}
	points, err := pointsOf(sc, req.Point)
	if err != nil {
		return nil, err
	}
	// Builds and benchmarks must not overlap with a nightly pass, a daemon
	// job or another run on this machine.
	unlock, err := a.LockMachine(ctx, true, sink)
	if err != nil {
		return nil, err
	}
	defer unlock()

	var target bench.Target
	if req.BinDir != "" {
		abs, err := filepath.Abs(req.BinDir)
		if err != nil {
			return nil, err
		}
		target = bench.Target{Name: filepath.Base(filepath.Dir(abs)), BinDir: abs, BuildOptions: "installed at " + abs}
		if filepath.Base(abs) != "bin" {
			target.Name = filepath.Base(abs)
		}
	} else if target, err = a.buildTarget(ctx, req.Rev, sink); err != nil {
		return nil, err
	}
	r, err := a.newRunner(firstNonEmpty(req.ClientBin, a.opts.ClientBin), req.KeepClusters, newLineWriter(sink, KindNote), a.log)
	if err != nil {
		return nil, err
	}
	defer r.Close(context.WithoutCancel(ctx))

	res := &RunResult{Scenario: sc.Name, File: sc.File, Target: target.Name, BinDir: target.BinDir, Samples: req.Samples, Vars: sc.Vars()}
	start := time.Now()
	total := len(points) * req.Samples
	done := 0
	for _, pt := range points {
		pr := RunPointResult{Point: pt.String()}
		for i := 1; i <= req.Samples; i++ {
			sink.note("%s%s: sample %d/%d (%d/%d overall, %s elapsed%s)", sc.Name, pointLabel(pt), i, req.Samples,
				done+1, total, time.Since(start).Round(time.Second), eta(start, done, total))
			s, err := r.Run(ctx, sc, target, pt)
			if err != nil {
				return nil, err
			}
			sink.emit(Event{Kind: KindSample, Target: target.Name, Point: pt.String(), Done: i, Of: req.Samples})
			pr.Samples = append(pr.Samples, *s)
			done++
		}
		for _, m := range sc.MetricSpecs() {
			// A server statistic the server lacks has no value (the sample's
			// warnings say why): left out, not taken as 0.
			var xs []float64
			for _, s := range pr.Samples {
				if v, ok := s.Values[m.Name]; ok {
					xs = append(xs, v)
				}
			}
			pr.Metrics = append(pr.Metrics, RunMetricResult{
				Name: m.Name, Unit: m.Unit, Better: better(m.Direction), Summary: stats.Summarize(xs), Values: xs,
				Bimodal: stats.Bimodal(xs),
			})
		}
		res.Points = append(res.Points, pr)
	}
	return res, nil
}

func eta(start time.Time, done, total int) string {
	if done == 0 {
		return ""
	}
	left := time.Duration(float64(time.Since(start)) / float64(done) * float64(total-done))
	return fmt.Sprintf(", ~%s left", left.Round(time.Second))
}
