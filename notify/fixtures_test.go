package notify

import (
	"fmt"
	"math"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Fixed findings for golden files, plots and posting tests. The numbers are
// made up but shaped like the PostgreSQL 16 COPY regressions discussed on
// pgsql-hackers; the later digits of the hashes are invented.

const repoURL = "https://git.postgresql.org/git/postgresql.git"

var t0 = time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC)

func commit(hash, subject, author string, day int) finding.Commit {
	return finding.Commit{Hash: hash, Subject: subject, Author: author,
		Date: time.Date(2023, 2, day, 10, 30, 0, 0, time.UTC), URL: CommitURL(repoURL, hash)}
}

// wobble returns n deterministic values around center with a relative
// spread of about rel.
func wobble(n int, center, rel float64, seed int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = math.Round(center*(1+rel*math.Sin(float64(i)*1.7+float64(seed)))*1000) / 1000
	}
	return xs
}

func env() finding.Environment {
	return finding.Environment{Host: "bench1", OS: "Debian GNU/Linux 12 (bookworm)", Kernel: "6.1.0-28-amd64",
		CPU: "AMD EPYC 7B13 64-Core Processor", Cores: 8, MemoryMB: 32 * 1024, Governor: "performance",
		Filesystem: "ext4 (/var/lib/pgbisect)", LoadAvg: 0.08, Extra: map[string]string{"thp": "madvise", "smt": "off"}}
}

func buildInfo() finding.BuildInfo {
	return finding.BuildInfo{System: "autoconf", Configure: []string{"--enable-depend", "--without-icu"}, CFLAGS: "-O2",
		Compiler: "gcc (Debian 12.2.0-14) 12.2.0", Key: "b7e1c0d2", ClientBin: "/var/lib/pgbisect/builds/c24e9ef330/bin"}
}

var (
	cGood   = commit("4b15868b69c8a6a3de2d0b2e0a1f1c2d3e4f5a6b", "Fix typo in comment", "Tom Lane <tgl@sss.pgh.pa.us>", 1)
	cBad    = commit("c24e9ef3302b0f3a9a8d7c6b5a4f3e2d1c0b9a88", "Stamp 16beta2.", "Tom Lane <tgl@sss.pgh.pa.us>", 28)
	cFaffP  = commit("5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b", "Remove unused include", "Peter Eisentraut <peter@eisentraut.org>", 3)
	cFaff   = commit("faff8f8e47f18c7d1b3e5e3c2d1a0f9e8d7c6b5a", "Allow underscores in integer and numeric constants.", "Peter Eisentraut <peter@eisentraut.org>", 4)
	cMid    = commit("0d3f5a8b7c6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c", "doc: Fix a few typos", "Michael Paquier <michael@paquier.xyz>", 10)
	c9fP    = commit("1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d", "Improve pg_dump's dumping of inherited columns", "Tom Lane <tgl@sss.pgh.pa.us>", 12)
	c9f     = commit("9f8377f7a27910bf0f35bf5169a8046731948a79", "Add a DEFAULT option to COPY FROM", "Andrew Dunstan <andrew@dunslane.net>", 13)
	cLate   = commit("7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d", "Fix assertion in hash join", "Thomas Munro <tmunro@postgresql.org>", 20)
	cSkip1  = commit("2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c", "Refactor relation extension, part 1", "Andres Freund <andres@anarazel.de>", 21)
	cRange1 = commit("3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d", "bufmgr: Introduce infrastructure for faster relation extension", "Andres Freund <andres@anarazel.de>", 22)
	cRange2 = commit("4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e", "bufmgr: Add Pin/UnpinLocalBuffer()", "Andres Freund <andres@anarazel.de>", 23)
	cRange3 = commit("00d1e02be24987180115e371abaeb84738257ae2", "hio: Use ExtendBufferedRelBy() to extend tables more efficiently", "Andres Freund <andres@anarazel.de>", 24)
	cSkip2  = commit("5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f", "hio: Relax rules for calling GetVisibilityMapPins()", "Andres Freund <andres@anarazel.de>", 25)
)

func cmp(metric, unit string, d stats.Direction, point string, good, bad, rel float64, n int, p float64, verdict string) finding.Comparison {
	r := bad / good
	w := rel * 1.2
	return finding.Comparison{Metric: metric, Unit: unit, Direction: d, Point: point,
		Good: finding.Side{Median: good, RelStddev: rel, N: n}, Bad: finding.Side{Median: bad, RelStddev: rel * 0.9, N: n},
		Ratio: r, RatioLow: r - w, RatioHigh: r + w, Confidence: 0.95, P: p, Verdict: verdict}
}

func step(c finding.Commit, order int, verdict string, center float64, n int, seed int) finding.Step {
	s := finding.Step{Commit: c, Order: order, Verdict: verdict}
	if n > 0 {
		s.Samples = wobble(n, center, 0.012, seed)
		s.N = n
		s.Median = median(s.Samples)
	}
	return s
}

// twoCulprits is a regression of single-client COPY with two culprits.
func twoCulprits() *finding.Finding {
	elapsed := func(good, bad float64, p float64, verdict string) finding.Comparison {
		return cmp("elapsed", "s", stats.LowerIsBetter, "", good, bad, 0.011, 10, p, verdict)
	}
	return &finding.Finding{
		ID: "20260130T020000Z-copy-single-c24e9ef330", Kind: finding.Regression, Branch: "master", Scenario: "copy-single",
		Metric: "elapsed", Unit: "s", Direction: stats.LowerIsBetter,
		Good: cGood, Bad: cBad,
		Culprits: []finding.Culprit{
			{Commit: c9f, Parent: c9fP, Verified: true, Comparisons: []finding.Comparison{
				elapsed(15.702, 17.281, 0.0002, "regression"),
				cmp("rows/s", "rows/s", stats.HigherIsBetter, "", 3184000, 2893000, 0.011, 10, 0.0002, "regression"),
			}},
			{Commit: cFaff, Parent: cFaffP, Verified: true, Comparisons: []finding.Comparison{
				elapsed(14.612, 15.702, 0.0004, "regression"),
				cmp("rows/s", "rows/s", stats.HigherIsBetter, "", 3421000, 3184000, 0.012, 10, 0.0004, "regression"),
			}},
		},
		Comparisons: []finding.Comparison{elapsed(14.605, 17.299, 0.0001, "regression")},
		Log: []finding.Step{
			step(cGood, 0, finding.StepGood, 14.6, 10, 1),
			step(cBad, 9, finding.StepBad, 17.3, 10, 2),
			step(cMid, 4, finding.StepBad, 15.7, 10, 3),
			step(cFaffP, 2, finding.StepGood, 14.61, 10, 4),
			step(cFaff, 3, finding.StepBad, 15.7, 10, 5),
			step(c9fP, 5, finding.StepGood, 15.71, 10, 6),
			step(c9f, 6, finding.StepBad, 17.28, 10, 7),
			step(cLate, 7, finding.StepNoCompile, 0, 0, 8),
		},
		Env: env(), Build: buildInfo(),
		Settings:  map[string]string{"shared_buffers": "1GB", "max_wal_size": "10GB", "synchronous_commit": "off"},
		Reproduce: "pgbisect bisect -s copy-single --good 4b15868b69 --bad c24e9ef330",
		Started:   t0, Finished: t0.Add(2*time.Hour + 13*time.Minute + 7*time.Second),
		Builds: 7, Samples: 140,
		Warnings: []string{"endpoint c24e9ef330 needed a clean rebuild after an incremental build failed"},
	}
}

// rangeCulprit is a regression of concurrent COPY whose culprit is bordered
// by unbuildable commits, so it is reported as a range.
func rangeCulprit() *finding.Finding {
	tps := func(point string, good, bad float64, p float64, verdict string) finding.Comparison {
		return cmp("tps", "tps", stats.HigherIsBetter, point, good, bad, 0.02, 15, p, verdict)
	}
	f := &finding.Finding{
		ID: "20260131T020000Z-copy-concurrent-5e6f7a8b9c", Kind: finding.Regression, Branch: "master", Scenario: "copy-concurrent",
		Metric: "tps", Unit: "tps", Direction: stats.HigherIsBetter, Point: "clients=16",
		Good: cLate, Bad: cSkip2,
		Culprits: []finding.Culprit{{Commit: cRange3, Parent: cLate, Range: []finding.Commit{cRange1, cRange2, cRange3}, Verified: false,
			Comparisons: []finding.Comparison{tps("clients=16", 41.3, 30.2, 0.0001, "regression"), tps("clients=1", 6.01, 5.98, 0.71, "same")}}},
		Comparisons: []finding.Comparison{tps("clients=16", 41.2, 30.4, 0.0001, "regression"), tps("clients=1", 6.02, 5.97, 0.64, "same")},
		Log: []finding.Step{
			step(cLate, 0, finding.StepGood, 41.2, 15, 1),
			step(cSkip2, 5, finding.StepBad, 30.4, 15, 2),
			step(cRange2, 3, finding.StepUnbuildable, 0, 0, 0),
			step(cSkip1, 1, finding.StepUnbuildable, 0, 0, 0),
			step(cRange1, 2, finding.StepUnbuildable, 0, 0, 0),
			step(cRange3, 4, finding.StepUnbuildable, 0, 0, 0),
		},
		Env: env(), Build: buildInfo(),
		Reproduce: "pgbisect bisect -s copy-concurrent --good 7c8d9e0f1a --bad 5e6f7a8b9c",
		Started:   t0.Add(24 * time.Hour), Finished: t0.Add(24*time.Hour + 58*time.Minute + 3*time.Second),
		Builds: 6, Samples: 60,
		Warnings: []string{"4 commits in the range do not build; the culprit is one of 3 commits"},
	}
	f.Log[2].Note = "hio.c:612:3: error: implicit declaration of function 'ExtendBufferedRelBy'\nmore"
	for _, sd := range []struct {
		side string
		c    finding.Commit
		base float64
	}{{"good", cLate, 41.2}, {"bad", cSkip2, 30.4}} {
		for run := 1; run <= 2; run++ {
			f.Progress = append(f.Progress, finding.Progress{Side: sd.side, Commit: sd.c.Hash[:10], Run: run, Interval: 1,
				TPS: wobble(60, sd.base, 0.06, run*7)})
		}
	}
	return f
}

// improvement is a nightly finding that undoes the first culprit above.
func improvement() *finding.Finding {
	fix := commit("b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0", "Avoid per-row palloc in NextCopyFrom()", "Masahiko Sawada <sawada.mshk@gmail.com>", 27)
	prev := commit("a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9", "Fix comment in copyfromparse.c", "Michael Paquier <michael@paquier.xyz>", 26)
	c := cmp("elapsed", "s", stats.LowerIsBetter, "", 17.3, 15.8, 0.01, 10, 0.0002, "improvement")
	f := &finding.Finding{
		ID: "20260202T020000Z-copy-single-b1c2d3e4f5", Kind: finding.Improvement, Branch: "master", Scenario: "copy-single",
		Metric: "elapsed", Unit: "s", Direction: stats.LowerIsBetter,
		Good: prev, Bad: fix,
		Culprits:    []finding.Culprit{{Commit: fix, Parent: prev, Verified: true, Comparisons: []finding.Comparison{c}}},
		Comparisons: []finding.Comparison{c},
		Log:         []finding.Step{step(prev, 0, finding.StepGood, 17.3, 10, 3), step(fix, 1, finding.StepBad, 15.8, 10, 4)},
		FollowUp:    &finding.FollowUp{FindingID: "20260130T020000Z-copy-single-c24e9ef330", Branch: "master", Culprit: c9f},
		Env:         env(), Build: buildInfo(),
		Reproduce: "pgbisect compare -s copy-single a0b1c2d3e4 b1c2d3e4f5",
		Started:   t0.Add(72 * time.Hour), Finished: t0.Add(72*time.Hour + 41*time.Minute),
		Builds: 1, Samples: 20,
	}
	s := &finding.Series{Metric: "elapsed", Unit: "s"}
	for i := 0; i < 30; i++ {
		v := 14.6
		if i >= 8 {
			v = 15.7
		}
		if i >= 14 {
			v = 17.3
		}
		if i >= 27 {
			v = 15.8
		}
		pt := finding.SeriesPoint{At: t0.Add(time.Duration(i-27) * 24 * time.Hour), Commit: fmt.Sprintf("%010x", 0xabc000+i), Median: v * (1 + 0.006*math.Sin(float64(i)))}
		if i == 8 || i == 14 || i == 27 {
			pt.FindingID = fmt.Sprintf("night-%d", i)
		}
		s.Points = append(s.Points, pt)
	}
	s.ChangePoints = []finding.ChangePoint{{Index: 8, Confirmed: true}, {Index: 14, Confirmed: true}, {Index: 21, Confirmed: false}, {Index: 27, Confirmed: true}}
	f.Series = s
	return f
}

// noRegression is an on-demand bisection whose endpoints do not differ.
func noRegression() *finding.Finding {
	c := cmp("elapsed", "s", stats.LowerIsBetter, "clients=4", 9.81, 9.85, 0.015, 10, 0.61, "same")
	return &finding.Finding{
		ID: "20260203T101500Z-copy-flush-after-c24e9ef330", Kind: finding.NoRegression, Branch: "REL_16_STABLE", Scenario: "copy-flush-after",
		Metric: "elapsed", Unit: "s", Direction: stats.LowerIsBetter, Point: "clients=4",
		Good: cGood, Bad: cBad,
		Comparisons: []finding.Comparison{c, cmp("elapsed", "s", stats.LowerIsBetter, "clients=1", 14.2, 14.24, 0.012, 10, 0.72, "same")},
		Log:         []finding.Step{step(cGood, 0, finding.StepGood, 9.81, 10, 5), step(cBad, 1, finding.StepGood, 9.85, 10, 6)},
		Env:         env(), Build: buildInfo(),
		Settings:  map[string]string{"backend_flush_after": "256kB"},
		Reproduce: "pgbisect bisect -s copy-flush-after --good 4b15868b69 --bad c24e9ef330",
		Started:   t0.Add(4*24*time.Hour + 8*time.Hour + 15*time.Minute), Finished: t0.Add(4*24*time.Hour + 8*time.Hour + 39*time.Minute),
		Builds: 0, Samples: 40,
		Warnings: []string{"few samples: 10 runs per side"},
	}
}

// unmeasurableCulprit is a regression whose culprit sits next to a commit
// that builds but whose server crashes at start: the crashing commit is
// skipped, the culprit becomes a range of the two, and the report shows
// the crashing commit's server log.
func unmeasurableCulprit() *finding.Finding {
	c := cmp("copy_time", "s", stats.LowerIsBetter, "", 0.402, 0.611, 0.02, 10, 0.0002, "regression")
	crash := commit("8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b", "postmaster: PANIC at start", "A. Hacker <hacker@example.org>", 13)
	f := &finding.Finding{
		ID: "20260204T020000Z-copy-single-c24e9ef330", Kind: finding.Regression, Branch: "master", Scenario: "copy-single",
		Metric: "copy_time", Unit: "s", Direction: stats.LowerIsBetter,
		Good: cGood, Bad: cBad,
		Culprits: []finding.Culprit{{Commit: c9f, Parent: c9fP, Range: []finding.Commit{crash, c9f}, Verified: true,
			Comparisons: []finding.Comparison{c}}},
		Comparisons: []finding.Comparison{cmp("copy_time", "s", stats.LowerIsBetter, "", 0.401, 0.612, 0.02, 10, 0.0001, "regression")},
		Log: []finding.Step{
			step(cGood, 0, finding.StepGood, 0.401, 10, 1),
			step(c9fP, 5, finding.StepGood, 0.402, 10, 2),
			step(crash, 6, finding.StepUnmeasurable, 0, 0, 0),
			step(c9f, 7, finding.StepBad, 0.611, 10, 3),
			step(cBad, 9, finding.StepBad, 0.612, 10, 4),
		},
		Env: env(), Build: buildInfo(),
		Reproduce: "pgbisect bisect -s copy-single --good 4b15868b69 --bad c24e9ef330",
		Started:   t0.Add(5 * 24 * time.Hour), Finished: t0.Add(5*24*time.Hour + 31*time.Minute),
		Builds: 4, Samples: 60,
		Warnings: []string{"1 culprit(s) of the copy_time regression (lower is better), worst first: 8a9b0c1d2e..9f8377f7a2 (copy_time +52.4%)"},
	}
	f.Log[2].Note = "the server crashed (start): PANIC:  pgbisect test: crash at start"
	f.Log[2].ServerLog = "2026-02-04 02:11:09.118 UTC [4242] LOG:  starting PostgreSQL 15.18\n" +
		"2026-02-04 02:11:09.120 UTC [4242] PANIC:  pgbisect test: crash at start"
	return f
}

var fixtures = []struct {
	name string
	f    func() *finding.Finding
}{
	{"regression-two-culprits", twoCulprits},
	{"regression-range", rangeCulprit},
	{"improvement", improvement},
	{"no-regression", noRegression},
	{"regression-tps", tpsCulprit},
	{"regression-unmeasurable", unmeasurableCulprit},
	{"regression-reverts", revertChecked},
	{"regression-profiled", profiledCulprits},
	{"regression-instructions", countedCulprits},
}

// countedCulprits is twoCulprits judged on instructions counted by
// valgrind, with the elapsed times of native runs beside each culprit:
// the first costs time too, the second (made up) barely any.
func countedCulprits() *finding.Finding {
	f := twoCulprits()
	f.ID = "20260130T020000Z-copy-single-instructions-c24e9ef330"
	f.Scenario, f.Metric, f.Unit, f.Counter = "copy-single-instructions", "copy_instructions", "instructions", "valgrind"
	count := func(good, bad, p float64) finding.Comparison {
		return cmp("copy_instructions", "instructions", stats.LowerIsBetter, "", good, bad, 0.00002, 3, p, "regression")
	}
	f.Culprits[0].Comparisons = []finding.Comparison{count(2.214e9, 2.651e9, 0.0005)}
	f.Culprits[0].Native = &finding.NativeTime{Step: "copy", Unit: "s", Parent: finding.Side{Median: 0.912, RelStddev: 0.061, N: 3},
		Culprit: finding.Side{Median: 1.094, RelStddev: 0.048, N: 3}, Ratio: 1.094 / 0.912}
	f.Culprits[1].Comparisons = []finding.Comparison{count(2.041e9, 2.214e9, 0.0005)}
	f.Culprits[1].Native = &finding.NativeTime{Step: "copy", Unit: "s", Parent: finding.Side{Median: 0.887, RelStddev: 0.072, N: 3},
		Culprit: finding.Side{Median: 0.902, RelStddev: 0.081, N: 3}, Ratio: 0.902 / 0.887}
	f.Comparisons = []finding.Comparison{count(2.041e9, 2.651e9, 0.0005)}
	for i := range f.Log {
		f.Log[i].Median *= 1.5e8
		for j := range f.Log[i].Samples {
			f.Log[i].Samples[j] *= 1.5e8
		}
	}
	f.Samples = 42
	f.Reproduce = "pgbisect bisect -s copy-single-instructions --good 4b15868b69 --bad c24e9ef330 --metric copy_instructions"
	return f
}

// revertChecked is twoCulprits with its revert checks: the first culprit's
// revert recovers its regression, the second's does not apply to the bad
// commit, so all of them together are not checked either.
func revertChecked() *finding.Finding {
	f := twoCulprits()
	f.ID = "20260130T020000Z-copy-single-c24e9ef330-reverts"
	back := cmp("elapsed", "s", stats.LowerIsBetter, "", 17.299, 15.738, 0.011, 10, 0.0002, "improvement")
	again := cmp("elapsed", "s", stats.LowerIsBetter, "", 15.702, 17.311, 0.011, 10, 0.0002, "regression")
	f.Reverts = []finding.RevertCheck{
		// Reverted one commit before Bad, where it still merges (as on
		// real history: a later fix changed its lines).
		{Culprits: []finding.Commit{c9f}, Build: "5d1e0c3b2a4f6e8d0c2b4a6f8e0d2c4b6a8f0e2d", Comparison: &back, Regression: &again,
			Base:       &finding.Commit{Hash: "483bdb2afec9e33ff05fd48a00e2656e30e714b7", Subject: "Support [NO] INDENT option in XMLSERIALIZE()."},
			BaseBehind: 1,
			Conflict: "patch revert of " + c9f.Hash[:10] + " does not apply: src/backend/commands/copyfromparse.c: a later commit changed the lines this commit changed " +
				"(lines 1685-1710 of c24e9ef330) (git revert would conflict here too)",
			Recovered: 0.973, RecoveredLow: 0.81, RecoveredHigh: 1.136, HasInterval: true, Confidence: 0.95, Recovers: true},
		{Culprits: []finding.Commit{cFaff}, Skipped: "the revert does not apply: patch revert of " + cFaff.Hash[:10] +
			" does not apply: src/backend/commands/copyfrom.c: a later commit changed the lines this commit changed (lines 612-620 of c24e9ef330) " +
			"(git revert would conflict here too); it conflicts already on top of 5f6e7d8c9b, the next commit after " + cFaff.Hash[:10]},
		{Culprits: []finding.Commit{c9f, cFaff}, All: true, Skipped: "the revert of " + cFaff.Hash[:10] + " does not apply"},
	}
	return f
}
