package intake

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/notify/githubtest"
)

// FuzzIntakeCommand feeds a comment body through what the bot does with
// one: notify.Commands finds the lines addressed to it, notify.SplitArgs
// splits them, Commands.Parse makes requests of them (patches from a local
// allowlisted host and pull requests of the fake GitHub). Whatever the
// comment: no panic, the time bounded, split words that re-quote to the
// same words, and either a short error or a request the queue's strict
// decoder reads, with its numbers in the ranges the other front doors
// allow, naming nothing on the daemon's disk (no client bin, a bare
// scenario name, revisions and a resume ID without control characters or
// a path's parts), that parses again, written back as a command, to the
// same request. Of the comment's command lines the bot takes at most
// notify.MaxCommandsPerComment, the rest counted.
func FuzzIntakeCommand(f *testing.F) {
	const token = "ghp_fuzzINTAKE"
	hub := githubtest.New(f, token)
	patch, err := os.ReadFile("../../../build/testdata/patches/run-as.diff")
	if err != nil {
		f.Fatal(err)
	}
	hub.Pulls[17] = string(patch)
	files := httptest.NewServer(http.FileServer(http.Dir("../../../build/testdata/patches")))
	f.Cleanup(files.Close)
	in, err := notify.NewIntake(notify.IntakeOptions{GitHubOptions: notify.GitHubOptions{Repo: "pg/bot", APIURL: hub.URL(), Token: token, Labels: hub.Labels}})
	if err != nil {
		f.Fatal(err)
	}
	parse := Commands{Scenarios: scenarios(f), Intake: in, Fetcher: &notify.PatchFetcher{Allow: []string{files.URL}, MaxBytes: 1 << 20}}.Parse

	// The examples of docs/github.md, then the same in other shapes.
	for _, c := range []string{
		"@pgbisect bisect copy-concurrent --good 1cbbee0338 --bad 00d1e02be2 --point clients=4 --metric copy_time",
		"@pgbisect compare copy-single REL_15_0 REL_16_0 --point clients=1",
		"@pgbisect compare copy-single REL_16_0 --patch https://github.com/user-attachments/files/123/v2-0001-fix.patch",
		"@pgbisect compare copy-single REL_16_0 --pr 17",
		"@pgbisect status",
		"@pgbisect cancel 42",
		"Thanks!\n@pgbisect bisect copy-single --good REL_15_0 --bad REL_16_0 --set rows=1000 --max-time 8h --min-effect 0.02 --max-samples 40\n" +
			"> @pgbisect status\n```\n@pgbisect cancel 7\n```\n",
		"@pgbisect compare copy-single REL_16_0 --patch " + files.URL + "/thread.mbox --pr '#17' --min-effect 0.1",
		`@pgbisect bisect copy-single --good "a b" --bad 'c d' --alpha 0.01 --profile-runs 0 --profile-guided=false --no-revert-check --first-parent`,
		"@pgbisect bisect --resume b-42 --max-time 1h",
		// Issue 36's attacks.
		"@pgbisect bisect --resume b-42 --client-bin /tmp/x",
		"@pgbisect bisect --resume ../../etc --max-time 1h",
		"@pgbisect compare copy-single REL_16_0 tmp/evil/bin",
		"@pgbisect bisect copy-single --good REL_15_0..REL_16_0 --bad 'HEAD:src'",
		"@pgbisect bisect copy-single --good \"a\x1b[2Jb\" --bad B",
		strings.Repeat("@pgbisect status\n", 7) + "@pgbisect cancel 1",
	} {
		f.Add(c)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body string) {
		all := notify.Commands(body, "@pgbisect")
		taken, dropped := notify.TakenCommands(body, "@pgbisect")
		if len(taken) > notify.MaxCommandsPerComment || len(taken)+dropped != len(all) || !reflect.DeepEqual(taken, all[:len(taken)]) {
			t.Errorf("of %d command lines %d taken, %d dropped", len(all), len(taken), dropped)
		}
		for _, line := range taken {
			if line != strings.TrimSpace(line) || strings.Contains(line, "\n") {
				t.Errorf("command line %q is not one trimmed line", line)
			}
			args, err := notify.SplitArgs(line)
			if err != nil {
				fuzztest.ShortError(t, err, len(strconv.Quote(line)))
				continue
			}
			requoted := make([]string, len(args))
			for i, a := range args {
				requoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
			}
			if again, err := notify.SplitArgs(strings.Join(requoted, " ")); err != nil || !reflect.DeepEqual(again, args) {
				t.Errorf("%q split into %q; quoted again it splits into %q (%v)", line, args, again, err)
			}
			var req Request
			fuzztest.Within(t, func() { req, err = parse(ctx, args) })
			if err != nil {
				fuzztest.ShortError(t, err, len(strconv.Quote(line)))
				continue
			}
			checkIntakeRequest(t, ctx, parse, args, req)
		}
	})
}

// checkIntakeRequest checks one parsed command: see FuzzIntakeCommand.
func checkIntakeRequest(t *testing.T, ctx context.Context, parse func(context.Context, []string) (Request, error), args []string, req Request) {
	t.Helper()
	switch req.Kind {
	case "status", "cancel":
		if !req.AnswerOnly || req.Kind != args[0] {
			t.Errorf("%q: %+v", args, req)
		}
		return
	case "bisect", "compare":
	default:
		t.Fatalf("%q: a request of kind %q", args, req.Kind)
	}
	kind, body, err := app.Encode(req.Request)
	if err != nil || kind != req.Kind {
		t.Fatalf("%q: a %s command encodes as %s: %v", args, req.Kind, kind, err)
	}
	r, _, err := app.DecodeRequest(kind, body)
	if err != nil {
		t.Fatalf("%q: the queue cannot read the request: %v\n%s", args, err, body)
	}
	var again []string
	switch r := r.(type) {
	case app.BisectRequest:
		if err := r.Validate(); err != nil {
			t.Errorf("%q: queued an invalid request: %v", args, err)
		}
		if r.ClientBin != "" {
			t.Errorf("%q: queued client bin %q", args, r.ClientBin)
		}
		if r.Resume != "" {
			if why := notRevision(r.Resume); why != "" || strings.ContainsAny(r.Resume, "/~^@") {
				t.Errorf("%q: queued resume %q (%s)", args, r.Resume, why)
			}
		} else {
			checkQueuedNames(t, args, r.Scenario, r.Good, r.Bad)
		}
		checkRanges(t, args, r.MinEffect, r.MaxSamples, r.Alpha)
		// The request's own flags, its scenario as the path it resolved
		// to ("bisect -s PATH" parses too: see docs/fuzzing.md).
		again = append([]string{"bisect"}, r.Args()...)
	case app.CompareRequest:
		checkRanges(t, args, r.MinEffect, r.MaxSamples, 0)
		if r.ClientBin != "" || len(r.Patches) > 0 || r.FlameGraph != "" {
			t.Errorf("%q: queued a path: %+v", args, r)
		}
		if r.B == "" {
			checkQueuedNames(t, args, r.Scenario, r.A)
		} else {
			checkQueuedNames(t, args, r.Scenario, r.A, r.B)
		}
		total := 0
		for _, p := range r.PatchData {
			if _, err := build.ParsePatches(p.Name, p.Data); err != nil {
				t.Errorf("%q: queued patch %s that does not parse: %v", args, p.Name, err)
			}
			total += len(p.Data)
		}
		if total > app.MaxRequestPatchBytes {
			t.Errorf("%q: queued %d bytes of patches", args, total)
		}
		if len(r.PatchData) > 0 {
			return // fetched again, they would be the same bytes: nothing new to learn
		}
		again = []string{"compare"}
		if r.Point != "" {
			again = append(again, "--point", r.Point)
		}
		if r.MinEffect != 0 {
			again = append(again, "--min-effect", strconv.FormatFloat(r.MinEffect, 'g', -1, 64))
		}
		if r.MaxSamples != 0 {
			again = append(again, "--max-samples", strconv.Itoa(r.MaxSamples))
		}
		// "--" before each word: a revision may start with a dash.
		again = append(again, "--", strings.TrimSuffix(filepath.Base(r.Scenario), ".yaml"), "--", r.A, "--", r.B)
	}
	req2, err := parse(ctx, again)
	if err != nil {
		t.Fatalf("%q parsed; written back as %q it does not: %v", args, again, err)
	}
	if !reflect.DeepEqual(req2.Request, req.Request) {
		t.Errorf("%q: %+v\nwritten back as %q: %+v", args, req.Request, again, req2.Request)
	}
}

// checkRanges holds a comment's numbers to the ranges the web form and
// the scenario's stats section allow.
func checkRanges(t *testing.T, args []string, minEffect float64, maxSamples int, alpha float64) {
	t.Helper()
	if !(minEffect >= 0 && minEffect < 1) {
		t.Errorf("%q: queued min_effect %g (a fraction in [0, 1))", args, minEffect)
	}
	if maxSamples < 0 {
		t.Errorf("%q: queued max_samples %d", args, maxSamples)
	}
	if !(alpha >= 0 && alpha < 0.5) {
		t.Errorf("%q: queued alpha %g (in [0, 0.5))", args, alpha)
	}
}

// checkQueuedNames holds a queued request's scenario to a bare name and
// its revisions to what notRevision allows.
func checkQueuedNames(t *testing.T, args []string, scenario string, revs ...string) {
	t.Helper()
	if scenario == "" || strings.ContainsAny(scenario, `/\`) || strings.HasPrefix(scenario, ".") || notRevision(scenario) != "" {
		t.Errorf("%q: queued scenario %q", args, scenario)
	}
	for _, rev := range revs {
		if why := notRevision(rev); why != "" {
			t.Errorf("%q: queued revision %q: %s", args, rev, why)
		}
	}
}

// notRevision says why s, queued as a revision, could be taken for a path
// or smuggle bytes (app's FuzzCheck states the same on its own).
func notRevision(s string) string {
	switch {
	case s == "" || len(s) > 200:
		return "its length"
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r >= 0x7f }):
		return "a control, space or non-ASCII character"
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "~"):
		return "a path's or an option's start"
	case strings.Contains(s, "..") || strings.Contains(s, "//") || strings.Contains(s, "/.") || strings.ContainsAny(s, `\:`):
		return "a path's parts"
	case slices.Contains(strings.Split(s, "/"), "bin"):
		return "a bin directory"
	}
	return ""
}
