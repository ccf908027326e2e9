package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
)

func init() {
	register(command{
		Name:    "demo",
		Summary: "bisect a PostgreSQL 15 history with two injected, labelled regressions, end to end",
		Run:     demoRun,
	})
}

// demoStep is one commit of the demo history.
type demoStep struct {
	kind string // comment, doc, regress, copy-regression, int-regression, break, fix
	path string
	msg  string
}

// demoSteps is the demo history on top of Debian's PostgreSQL 15 source:
// neutral commits (comments in .c files, documentation, regression tests),
// a commit that breaks the build and the one that fixes it, and two
// clearly labelled injected regressions in the paths of the PG16 COPY
// thread (per-row work in NextCopyFrom, per-digit work in pg_strtoint32).
// The break sits at the first midpoint the search picks, so every run
// shows the skip.
var demoSteps = []demoStep{
	{"comment", "src/backend/utils/adt/int.c", "int.c: clarify a comment"},
	{"doc", "doc/src/sgml/ref/copy.sgml", "doc: mention FREEZE in COPY's notes"},
	{"regress", "src/test/regress/sql/copy.sql", "regress: note on COPY tests"},
	{"comment", "src/backend/commands/copyfrom.c", "copyfrom.c: comment on buffering"},
	{"doc", "doc/src/sgml/datatype.sgml", "doc: integer types wording"},
	{"comment", "src/backend/utils/adt/numutils.c", "numutils.c: file header comment"},
	{"comment", "src/backend/executor/execMain.c", "execMain.c: comment typo"},
	{"regress", "src/test/regress/sql/int4.sql", "regress: note on int4 tests"},
	{"copy-regression", "src/backend/commands/copyfromparse.c", "INJECTED REGRESSION (pgbisect demo): extra per-row work in NextCopyFrom"},
	{"doc", "doc/src/sgml/perform.sgml", "doc: bulk loading advice"},
	{"comment", "src/backend/access/heap/heapam.c", "heapam.c: comment on multi-inserts"},
	{"comment", "src/backend/utils/adt/varlena.c", "varlena.c: comment wording"},
	{"regress", "src/test/regress/sql/copy2.sql", "regress: note on copy2 tests"},
	{"comment", "src/backend/tcop/postgres.c", "postgres.c: comment wording"},
	{"break", "src/backend/utils/adt/int8.c", "int8.c: refactor (BREAKS THE BUILD, pgbisect demo)"},
	{"fix", "src/backend/utils/adt/int8.c", "int8.c: fix the build"},
	{"doc", "doc/src/sgml/ref/psql-ref.sgml", "doc: psql wording"},
	{"comment", "src/backend/commands/copyto.c", "copyto.c: comment wording"},
	{"comment", "src/backend/utils/mmgr/mcxt.c", "mcxt.c: comment on contexts"},
	{"regress", "src/test/regress/sql/int8.sql", "regress: note on int8 tests"},
	{"comment", "src/backend/storage/buffer/bufmgr.c", "bufmgr.c: comment wording"},
	{"int-regression", "src/backend/utils/adt/numutils.c", "INJECTED REGRESSION (pgbisect demo): extra per-digit work in pg_strtoint32"},
	{"doc", "doc/src/sgml/func.sgml", "doc: function table wording"},
	{"comment", "src/backend/utils/adt/int.c", "int.c: another comment"},
	{"regress", "src/test/regress/sql/numeric.sql", "regress: note on numeric tests"},
	{"comment", "src/backend/catalog/heap.c", "heap.c: comment wording"},
	{"doc", "doc/src/sgml/config.sgml", "doc: GUC wording"},
	{"comment", "src/backend/utils/cache/relcache.c", "relcache.c: comment wording"},
	{"regress", "src/test/regress/sql/select.sql", "regress: note on select tests"},
	{"comment", "src/backend/nodes/list.c", "list.c: comment wording"},
}

// demoStepsSmall is demoSteps with small injected regressions (issue 28):
// the same history and places, but ~20 extra instructions per row in
// NextCopyFrom and one per digit in pg_strtoint32, each 1-3% of the
// COPY's instructions instead of +90% and +60%. Their hashes differ from
// demoSteps', so the two histories never share a culprit build.
var demoStepsSmall = func() []demoStep {
	steps := slices.Clone(demoSteps)
	for i, s := range steps {
		switch s.kind {
		case "copy-regression":
			steps[i] = demoStep{"small-copy-regression", s.path, "INJECTED SMALL REGRESSION (pgbisect demo): a little per-row work in NextCopyFrom"}
		case "int-regression":
			steps[i] = demoStep{"small-int-regression", s.path, "INJECTED SMALL REGRESSION (pgbisect demo): a little per-digit work in pg_strtoint32"}
		}
	}
	return steps
}()

// demoHistory is a prepared demo repository and its truth.
type demoHistory struct {
	Dir      string   `json:"dir"`
	Good     string   `json:"good"`            // the imported release
	Bad      string   `json:"bad"`             // the last commit
	Commits  []string `json:"commits"`         // every added commit, oldest first
	Culprits []string `json:"culprits"`        // the injected regressions, oldest first
	Broken   string   `json:"broken"`          // the commit that does not build
	Docs     []string `json:"docs"`            // commits that change nothing compiled
	Small    bool     `json:"small,omitempty"` // the regressions are demoStepsSmall's
}

// edit is the change of the step, the n-th of its history. The edits are
// pgsrc's (pgsrc.DemoEdit), shared with the soak run.
func (s demoStep) edit(n int) func(old string) (string, error) {
	return pgsrc.DemoEdit(s.kind, s.path, n)
}

// demoPrepare creates the demo repository at dir, or reuses it when it was
// prepared before. With shared set the release is hard-linked from the
// test fixture (pgsrc.NewRepo); otherwise it is imported from the tarball.
// Commits are deterministic: the same tarball gives the same hashes, so
// builds are shared with the tests and earlier demos.
func demoPrepare(ctx context.Context, dir string, shared bool) (*demoHistory, error) {
	return demoPrepareSteps(ctx, dir, shared, demoSteps)
}

// demoPrepareSteps is demoPrepare with the given history on top of the
// release.
func demoPrepareSteps(ctx context.Context, dir string, shared bool, steps []demoStep) (*demoHistory, error) {
	meta := dir + ".json"
	if data, err := os.ReadFile(meta); err == nil {
		var h demoHistory
		// A repository of the other history (--small or not, same --repo)
		// is made again.
		if json.Unmarshal(data, &h) == nil && h.Bad != "" && h.Small == slices.Equal(steps, demoStepsSmall) {
			if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
				return &h, nil
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	var base string
	var err error
	if shared {
		base, err = pgsrc.NewRepo(ctx, dir)
	} else {
		var tarball string
		if tarball, err = pgsrc.Tarball(); err == nil {
			if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
				base, err = pgsrc.Import(ctx, tarball, dir)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("preparing the demo repository: %w", err)
	}
	h, err := demoCommits(dir, base, steps)
	if err != nil {
		return nil, err
	}
	data, _ := json.MarshalIndent(h, "", "  ")
	if err := os.WriteFile(meta, data, 0o644); err != nil {
		return nil, err
	}
	return h, nil
}

// demoCommits adds steps to the repository at dir, whose branch is at
// base, one deterministic commit each, and returns the history and its
// truth.
func demoCommits(dir, base string, steps []demoStep) (*demoHistory, error) {
	h := &demoHistory{Dir: dir, Good: base, Small: slices.Equal(steps, demoStepsSmall)}
	for i, s := range steps {
		hash, err := pgsrc.Commit(dir, s.msg, pgsrc.BaseDate.Add(time.Duration(i+1)*time.Hour),
			map[string]func(string) (string, error){s.path: s.edit(i + 1)})
		if err != nil {
			return nil, fmt.Errorf("preparing the demo repository: %w", err)
		}
		h.Commits = append(h.Commits, hash)
		switch s.kind {
		case "copy-regression", "int-regression", "small-copy-regression", "small-int-regression":
			h.Culprits = append(h.Culprits, hash)
		case "break":
			h.Broken = hash
		case "doc", "regress":
			h.Docs = append(h.Docs, hash)
		}
	}
	h.Bad = h.Commits[len(h.Commits)-1]
	return h, nil
}

// demoMetric is what the demo judges: its scenario, metric and size.
type demoMetric struct {
	scenario, metric string
	rows             int
}

// demoMetrics are the demo's --metric choices. Counted under valgrind a
// row costs ~30x its native time, so the instructions demo loads fewer
// rows: a count needs no length to average out noise.
var demoMetrics = map[string]demoMetric{
	"time":         {"configs/scenarios/copy-single.yaml", "copy_time", 300000},
	"instructions": {"configs/scenarios/copy-single-instructions.yaml", "copy_instructions", 100000},
}

func demoRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "demo", "[--metric time|instructions] [--small] [--rows N] [--state DIR] [-s SCENARIO] [--json]")
	scenario := fs.String("s", "", "scenario file (default configs/scenarios/copy-single.yaml, or copy-single-instructions.yaml with --metric instructions)")
	metric := fs.String("metric", "time", "judge the COPY's elapsed `time` (copy_time) or the server's `instructions` (copy_instructions, counted by perf or valgrind)")
	rows := fs.Int("rows", 0, "rows COPY loads per sample (default 300000 for time, 100000 for instructions)")
	small := fs.Bool("small", false, "inject two small regressions (1-3% of the COPY's instructions) instead of two large ones,\ninto their own repository (DIR/demo/postgresql-15-demo-small.git)")
	minEffect := fs.Float64("min-effect", 0, "smallest change worth a culprit, as a fraction (default 0.10, or 0.01 with --small)")
	maxSamples := fs.Int("max-samples", 30, "sample budget per side of one comparison")
	asJSON := fs.Bool("json", false, "print the finding as JSON on stdout")
	configFile := fs.String("config", "", "config `FILE` (default: the lookup order of docs/cli.md)")
	stateDir := fs.String("state", "", "state `DIR` (default from the config); the demo repository goes to DIR/demo")
	repoDir := fs.String("repo", "", "where to create the demo repository (default: DIR/demo/postgresql-15-demo.git)")
	profileRuns := fs.Int("profile-runs", app.DefaultProfileRuns, "CPU-profile each culprit and its parent with perf this many runs each (0: no profiles)")
	guided := fs.Bool("profile-guided", app.DefaultProfileGuided, "profile the endpoints and try first the commits touching the files of the functions that grew")
	verbose := fs.Bool("verbose", false, "on a terminal, print every build and sample line instead of one status line updated in place\n(they go to STATE/logs/bisect-ID.log otherwise)")
	shared := fs.Bool("shared-fixture", false, "hard-link the release from the test fixture instead of importing the tarball (tests)")
	if _, err := parseFlags(fs, env); err != nil {
		return err
	}
	demo, ok := demoMetrics[*metric]
	if !ok {
		return usageError("--metric %q: use time (the COPY's elapsed time) or instructions (the server's instruction count)", *metric)
	}
	if *scenario == "" {
		*scenario = demo.scenario
	}
	if *rows == 0 {
		*rows = demo.rows
	}
	steps, name, sizes := demoSteps, "postgresql-15-demo.git", "regressions"
	if *small {
		steps, name, sizes = demoStepsSmall, "postgresql-15-demo-small.git", "small regressions (1-3%)"
	}
	if *minEffect == 0 {
		*minEffect = 0.10
		if *small {
			*minEffect = 0.01
		}
	}
	if _, err := os.Stat(*scenario); errors.Is(err, os.ErrNotExist) {
		return usageError("scenario %s not found: run the demo from the pgbisect source directory, or give -s", *scenario)
	}
	cfg, src, err := loadConfigFrom(*configFile, *stateDir)
	if err != nil {
		return err
	}
	if *stateDir != "" {
		cfg.StateDir = *stateDir
	}
	if *repoDir == "" {
		*repoDir = filepath.Join(cfg.StateDir, "demo", name)
	}
	if abs, err := filepath.Abs(*repoDir); err == nil {
		cfg.Repo = abs
	}
	printConfigLine(env.Stderr, src, cfg)
	fmt.Fprintf(env.Stderr, "preparing the demo repository %s (%d commits on Debian's PostgreSQL 15 source)\n", *repoDir, len(steps))
	h, err := demoPrepareSteps(ctx, *repoDir, *shared, steps)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "injected %s: %s (COPY FROM per-row work), %s (pg_strtoint32 per-digit work); %s does not build\n",
		sizes, short(h.Culprits[0]), short(h.Culprits[1]), short(h.Broken))
	cfg.Repo = h.Dir
	p := newBisectProgress(terminalOf(env.Stderr), *verbose, filepath.Join(cfg.StateDir, "logs"))
	if l := p.logger(); l != nil {
		env.Log = l
	}
	a, err := app.Open(ctx, appOptions(cfg, env.Log), nil)
	if err != nil {
		return err
	}
	defer a.Close()
	out, err := a.Bisect(ctx, "", app.BisectRequest{
		Scenario: *scenario, Good: h.Good, Bad: h.Bad, Metric: demo.metric,
		Set:           map[string]string{"rows": fmt.Sprint(*rows), "persistence": "UNLOGGED"},
		MinEffect:     *minEffect,
		MaxSamples:    *maxSamples,
		ProfileRuns:   profileRuns,
		ProfileGuided: guided,
	}, p.sink())
	p.close()
	if err != nil {
		return err
	}
	if err := bisectPrint(env.Stdout, out, *asJSON); err != nil {
		return err
	}
	if err := demoVerdict(out.State, h.Culprits); err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintf(env.Stdout, "\nthe demo injected 2 regressions; the bisection named both exactly: %s and %s\n", short(h.Culprits[0]), short(h.Culprits[1]))
	}
	return nil
}

// demoVerdict checks that the bisection named every injected regression
// exactly (one commit, re-verified) and blamed nothing else. Otherwise it
// returns an error that gives the figures: where each missed regression
// ended up (a range of candidates, an unresolved range, an unconfirmed
// suspect) with its comparison and the noise of both sides, so a machine
// too noisy for the demo shows up as such.
func demoVerdict(st *bisect.State, injected []string) error {
	figures := func(r *bisect.Result) string {
		if r == nil {
			return "no comparison"
		}
		return fmt.Sprintf("%s, noise ±%.1f%% / ±%.1f%%", st.Effect(r), 100*r.RelA, 100*r.RelB)
	}
	name := func(i int) string { return st.Commits[i].Short() }
	span := func(r bisect.Range) string { return name(r.First) + ".." + name(r.Last) }
	index := func(hash string) int {
		return slices.IndexFunc(st.Commits, func(c bisect.Commit) bool { return c.Hash == hash })
	}
	var problems []string
	named := map[string]bool{}
	for _, c := range st.Culprits {
		if c.Exact() {
			hash := st.Commits[c.Candidates[0]].Hash
			named[hash] = true
			if !slices.Contains(injected, hash) {
				problems = append(problems, fmt.Sprintf("blamed %s, which is not an injected regression (%s)", name(c.Candidates[0]), figures(c.Result)))
			}
		}
	}
	for _, hash := range injected {
		if named[hash] {
			continue
		}
		i := index(hash)
		where := "not found in any culprit, unresolved range or suspect"
		switch {
		case i < 0:
			where = "not in the bisected range"
		default:
			for _, c := range st.Culprits {
				if !c.Exact() && slices.Contains(c.Candidates, i) {
					where = fmt.Sprintf("only inside a culprit range of %d candidates %s (%s)", len(c.Candidates), span(c.Range), figures(c.Result))
				}
			}
			for _, u := range st.Unresolved {
				if u.First <= i && i <= u.Last {
					where = fmt.Sprintf("inside the unresolved range %s (%s)", span(u), figures(u.Result))
				}
			}
			for _, u := range st.Unconfirmed {
				if u.First <= i && i <= u.Last {
					where = fmt.Sprintf("suspected in %s but not confirmed (%s)", span(u), figures(u.Result))
				}
			}
		}
		problems = append(problems, fmt.Sprintf("injected regression %s %s", short(hash), where))
	}
	if len(problems) == 0 {
		return nil
	}
	var endpoints *bisect.Result
	if len(st.Pairs) > 0 {
		endpoints = st.Pairs[0].Result
	}
	return fmt.Errorf("the demo did not name both injected regressions exactly: %s; endpoints %s; %d samples (%s: %s). "+
		"A machine this noisy cannot narrow them within the budget: run it on an idle machine, or with --max-samples 60",
		strings.Join(problems, "; "), figures(endpoints), st.SamplesTaken, st.Outcome, st.Summary)
}

func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}
