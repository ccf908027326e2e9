package notify

import (
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// tpsCulprit is a regression of a higher-is-better metric (pgbench tps
// fell 22%) with one culprit, measured with a shipped scenario whose
// settings are templates: its report must give the signed change (-22.0%)
// with "higher is better" everywhere, and the settings the run really used
// (shared_buffers 16GB from --set, not "{{.shared_buffers}}").
func tpsCulprit() *finding.Finding {
	sc, err := bench.LoadFileWith("../configs/scenarios/clog-unlogged-pgbench.yaml", map[string]string{"shared_buffers": "16GB", "scale": "300"})
	if err != nil {
		panic(err)
	}
	pt, err := sc.FindPoint("clients=16")
	if err != nil {
		panic(err)
	}
	settings, err := sc.SettingsAt(pt)
	if err != nil {
		panic(err)
	}
	tps := func(good, bad, p float64, verdict string) finding.Comparison {
		return cmp("tps", "tps", stats.HigherIsBetter, "clients=16", good, bad, 0.015, 12, p, verdict)
	}
	culprit := commit("f4ad54a5dd0c1b2a3f4e5d6c7b8a9f0e1d2c3b4a", "Use a spinlock for the clog buffer mapping", "A. Hacker <a.hacker@example.org>", 18)
	parent := commit("e3bc43a4cc1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f", "Fix comment in clog.c", "B. Hacker <b.hacker@example.org>", 17)
	return &finding.Finding{
		ID: "20260205T020000Z-clog-unlogged-pgbench-c24e9ef330", Kind: finding.Regression, Branch: "master", Scenario: sc.Name,
		Metric: "tps", Unit: "tps", Direction: stats.HigherIsBetter, Point: pt.String(),
		Good: cGood, Bad: cBad,
		Culprits: []finding.Culprit{{Commit: culprit, Parent: parent, Verified: true,
			Comparisons: []finding.Comparison{tps(31250, 24375, 0.0001, "regression")}}},
		Comparisons: []finding.Comparison{tps(31400, 24490, 0.0001, "regression")},
		Log: []finding.Step{
			step(cGood, 0, finding.StepGood, 31400, 12, 11),
			step(cBad, 3, finding.StepBad, 24490, 12, 12),
			step(parent, 1, finding.StepGood, 31250, 12, 13),
			step(culprit, 2, finding.StepBad, 24375, 12, 14),
		},
		Env: env(), Build: buildInfo(), Settings: settings,
		Reproduce: "pgbisect bisect -s clog-unlogged-pgbench --set shared_buffers=16GB --set scale=300 --point clients=16 --metric tps --good 4b15868b69 --bad c24e9ef330",
		Started:   t0.Add(6 * 24 * time.Hour), Finished: t0.Add(6*24*time.Hour + 52*time.Minute),
		Builds: 4, Samples: 96,
	}
}
