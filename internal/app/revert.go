package app

// The revert check after a bisection (issue 16). This file only wires:
// build does the reverting (build.Repo.Revert), bench/stats the recovered
// fraction (stats.Recovered), notify the report (finding.RevertCheck).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
)

// RevertInputs are what a revert check needs from the bisection.
type RevertInputs struct {
	Repo       *build.Repo
	Builder    *build.Builder
	Runner     *bench.Runner // with its client tools set
	Scenario   *bench.Scenario
	Point      bench.Point
	Thresholds stats.Thresholds // the bisection's
	StateDir   string
	ID         string // the bisection's; its checks are kept under StateDir/reverts/ID.json
	Skip       bool   // --no-revert-check
}

// RevertChecks reverts each culprit of f on top of f.Bad (and, with
// several, all of them), builds the result and measures it against Bad.
// Where the revert conflicts on Bad (later commits changed the culprit's
// lines), it reverts on top of the latest commit where it merges and
// measures against that commit instead, saying so in the check.
// Its errors are reported in the checks, never returned: a revert check
// does not change the finding. A bisection checked before (resumed) keeps
// its checks.
func RevertChecks(ctx context.Context, sink Sink, in RevertInputs, f *finding.Finding) []finding.RevertCheck {
	if !in.wanted(f) {
		return nil
	}
	saved := filepath.Join(in.StateDir, "reverts", in.ID+".json")
	if data, err := os.ReadFile(saved); err == nil {
		var checks []finding.RevertCheck
		if json.Unmarshal(data, &checks) == nil {
			return checks
		}
	}
	var checks []finding.RevertCheck
	var exact []finding.Commit
	var notApplied string
	for _, c := range f.Culprits {
		if c.IsRange() {
			checks = append(checks, finding.RevertCheck{Culprits: []finding.Commit{c.Commit},
				Skipped: fmt.Sprintf("%s is one of a range of %d candidates next to commits that could not be measured: reverting one of them would not tell which commit it was",
					c.Commit.ShortHash(), len(c.Range))})
			if notApplied == "" {
				notApplied = fmt.Sprintf("culprit %s is a range of candidates", c.Commit.ShortHash())
			}
			continue
		}
		exact = append(exact, c.Commit)
		rc := revertCheck(ctx, sink, in.at(c), f, []finding.Commit{c.Commit}, c.Parent.Hash, c.Commit.Hash)
		if rc.Build == "" && notApplied == "" {
			notApplied = fmt.Sprintf("the revert of %s does not apply", c.Commit.ShortHash())
		}
		checks = append(checks, rc)
	}
	if len(f.Culprits) > 1 {
		all := finding.RevertCheck{Culprits: exact, All: true}
		if notApplied != "" {
			all.Skipped = notApplied
		} else {
			all = revertCheck(ctx, sink, in.at(f.Culprits[0]), f, exact, f.Good.Hash, f.Bad.Hash)
			all.All = true
		}
		checks = append(checks, all)
	}
	if ctx.Err() == nil {
		if data, err := json.Marshal(checks); err == nil {
			if os.MkdirAll(filepath.Dir(saved), 0o755) == nil {
				_ = os.WriteFile(saved, data, 0o644)
			}
		}
	}
	return checks
}

// revertCheck makes one check: revert the culprits on top of Bad (or of
// RevertBase's commit where that conflicts), build
// that, and measure it against Bad and, in the same interleaved session,
// the regression being undone (from, to: the culprit's parent and the
// culprit, or the endpoints for all culprits; their builds are cached by
// the bisection), at the looks of a culprit check (the bisection's
// thresholds with bisect.CheckBudget times the budget) until the
// recovered fraction's interval decides the rule or the budget is spent.
// The regression is measured again rather than taken from the bisection
// because a check stops as soon as its verdict is clear, often with an
// interval too wide to bound a fraction, and because the machine's speed
// drifts between then and now.
func revertCheck(ctx context.Context, sink Sink, in RevertInputs, f *finding.Finding, culprits []finding.Commit, from, to string) finding.RevertCheck {
	rc := finding.RevertCheck{Culprits: culprits}
	var hashes, names []string
	for _, c := range culprits {
		hashes = append(hashes, c.Hash)
		names = append(names, c.ShortHash())
	}
	label := "revert check " + strings.Join(names, "+")
	onto := f.Bad.Hash
	reverted, err := in.Repo.Revert(onto, hashes...)
	var ae *build.ApplyError
	if errors.As(err, &ae) {
		// Later commits changed the culprit's lines: revert it where it
		// still merges, the latest commit on the way to Bad, and say so.
		base, behind, berr := in.Repo.RevertBase(onto, hashes...)
		if berr != nil {
			rc.Skipped = "the revert does not apply: " + err.Error() + "; " + berr.Error()
			sink.note("%s: %s", label, rc.Skipped)
			return rc
		}
		rc.Conflict = err.Error()
		b := finding.Commit{Hash: base.Hash, Subject: base.Subject}
		rc.Base, rc.BaseBehind = &b, behind
		sink.note("%s: on top of %s the revert conflicts (%s); reverting on top of %s instead, the latest commit where it merges (%d commits before %s)",
			label, build.Short(onto), err, base.Short(), behind, build.Short(onto))
		onto = base.Hash
		reverted, err = in.Repo.Revert(onto, hashes...)
	}
	if err != nil {
		rc.Skipped = err.Error()
		return rc
	}
	rc.Build = reverted.Hash
	sink.note("%s: %s with %s reverted is %s; building it (or reusing its cached build)",
		label, build.Short(onto), strings.Join(names, " and "), reverted.Short())
	// The targets, each commit once: the regression's two sides, Bad and
	// the reverted build.
	var targets []bench.Target
	index := map[string]int{}
	for _, h := range []string{from, to, onto, reverted.Hash} {
		if _, ok := index[h]; ok {
			continue
		}
		inst, err := in.Builder.Build(ctx, h)
		var be *build.Error
		if errors.As(err, &be) {
			rc.Skipped = fmt.Sprintf("%s does not build (%s failed: %s; log %s)", build.Short(h), be.Phase, bisectErrorLine(be.Tail), be.LogPath)
			return rc
		}
		if err != nil {
			rc.Skipped = fmt.Sprintf("building %s: %v", build.Short(h), err)
			return rc
		}
		index[h] = len(targets)
		targets = append(targets, bench.Target{Name: build.Short(h), BinDir: inst.BinDir(), BuildOptions: inst.Options.String()})
	}
	rev := index[reverted.Hash]
	targets[rev].Name = build.Short(onto) + "-revert-" + strings.Join(names, "-")
	if in.Runner.ClientBin == "" {
		in.Runner.ClientBin = targets[0].BinDir // a finished bisection resumed: no client was chosen
	}

	metric, err := bisectMetric(in.Scenario, f.Metric)
	if err != nil {
		rc.Skipped = err.Error()
		return rc
	}
	th := in.Thresholds.WithDefaults()
	th.MaxSamples *= bisect.CheckBudget
	th.Batch *= bisect.CheckBudget
	order := bench.Order{Seed: stats.SeedOf(reverted.Hash + from), Targets: len(targets)}
	values := make([][]float64, len(targets))
	if err := in.Runner.Check(ctx, in.Scenario, targets, in.Point); err != nil {
		rc.Skipped = "measuring: " + err.Error()
		return rc
	}
	// The looks are those of every comparison (bench.Loop, in the looks
	// th plans): the first after th.FirstLook() runs of each build, each
	// next one as far as th.More plans it for the comparisons so far,
	// until the recovered fraction's interval decides the rule or the
	// budget is spent. A change many times the noise is decided at the
	// first look.
	loop := &bench.Loop{Scenario: in.Scenario, Point: in.Point, Targets: targets, Order: order, First: th.FirstLook(),
		After: func(i int, s *bench.Sample) error {
			if v, ok := s.Values[metric.Name]; ok {
				values[i] = append(values[i], v)
			}
			sink.note("%s: %s sample %d of up to %d", label, s.Target, len(values[i]), th.MaxSamples)
			return nil
		},
		Next: func(int) (int, error) {
			regC := stats.Compare(values[index[from]], values[index[to]], metric.Direction, th)
			revC := stats.Compare(values[index[onto]], values[rev], metric.Direction, th)
			rec := stats.Recovered(stats.EffectOf(regC), stats.EffectOf(revC), stats.DefaultThresholds.Confidence)
			regN := finding.FromStats(metric.Name, metric.Unit, in.Point.String(), regC)
			revN := finding.FromStats(metric.Name, metric.Unit, in.Point.String(), revC)
			rc.Regression, rc.Comparison = &regN, &revN
			rc.Recovered, rc.Confidence, rc.Recovers, rc.Warnings = rec.Fraction, rec.Confidence, rec.Recovers, rec.Warnings
			rc.HasInterval = !isInf(rec.Lo) && !isInf(rec.Hi)
			rc.RecoveredLow, rc.RecoveredHigh = rec.Lo, rec.Hi
			if rec.Recovers || (rc.HasInterval && rec.Hi < stats.RecoverBound) {
				return 0, nil
			}
			// The rule is the fraction's, not a verdict's: each
			// comparison is asked for its next look as if undecided.
			regC.Verdict, revC.Verdict = stats.Unknown, stats.Unknown
			return max(th.More(regC), th.More(revC)), nil
		}}
	n, err := loop.Run(ctx, in.Runner)
	if err != nil {
		rc.Skipped = "measuring: " + err.Error()
		return rc
	}
	sink.note("%s: recovers %.0f%% of the change [%.0f%%, %.0f%%], after %d runs of each of the %d builds", label, 100*rc.Recovered, 100*rc.RecoveredLow, 100*rc.RecoveredHigh, n, len(targets))
	return rc
}

func isInf(v float64) bool { return v > 1e308 || v < -1e308 }

// wanted reports whether RevertChecks would check anything of f.
func (in RevertInputs) wanted(f *finding.Finding) bool {
	return !in.Skip && (f.Kind == finding.Regression || f.Kind == finding.Improvement) && len(f.Culprits) > 0
}
