package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/config"
	"github.com/pgbisect/pgbisect/internal/jobs"
	"github.com/pgbisect/pgbisect/notify/githubtest"
	"github.com/pgbisect/pgbisect/store/storetest"
)

func TestIntakeParser(t *testing.T) {
	cfg, err := config.Load([]byte("repo: /x\n"), "../../configs/pgbisect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	parse := intakeParser(cfg, intakePatches{})
	req, err := parse(context.Background(), strings.Fields("bisect copy-single --good REL_15_0 --bad REL_16_0 --metric copy_time --set rows=1000"))
	if err != nil {
		t.Fatal(err)
	}
	var b app.BisectRequest
	if err := json.Unmarshal(req.Body, &b); err != nil || req.Kind != "bisect" || !filepath.IsAbs(b.Scenario) ||
		!strings.HasSuffix(b.Scenario, "configs/scenarios/copy-single.yaml") || b.Good != "REL_15_0" || b.Set["rows"] != "1000" {
		t.Errorf("bisect: %+v %s %v", req, req.Body, err)
	}
	req, err = parse(context.Background(), strings.Fields("compare copy-single REL_15_0 REL_16_0 --point clients=1"))
	var c app.CompareRequest
	if err != nil || json.Unmarshal(req.Body, &c) != nil || req.Kind != "compare" || c.A != "REL_15_0" || c.B != "REL_16_0" || c.Point != "clients=1" {
		t.Errorf("compare: %+v %v", req, err)
	}
	for _, tc := range []struct{ cmd, want string }{
		{"bisect copy-singel --good A --bad B", `unknown scenario "copy-singel" (did you mean copy-single?)`},
		{"bisect copy-single --good A --badd B", "bisect: unknown flag --badd (did you mean --bad?)"},
		{"bisect ../../etc/passwd --good A --bad B", "give the name of one of the bot's scenarios, not a path"},
		{"bisct copy-single", `unknown command "bisct" (did you mean bisect?)`},
		{"compare copy-single A", "compare takes a scenario and two revisions"},
		{"cancel x", `job ID "x" is not a number`},
		{"", "there is no command after the handle"},
	} {
		if _, err := parse(context.Background(), strings.Fields(tc.cmd)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.cmd, err, tc.want)
		}
	}
}

// TestCommentQueuesOneRiverJob: a bisect command in a comment becomes one
// River job (queued in the transaction that records the comment), however
// often it is polled; status lists it and cancel cancels it, in answers
// on the thread.
func TestCommentQueuesOneRiverJob(t *testing.T) {
	const token = "ghp_cliIntakeTOKEN"
	t.Setenv("GITHUB_TOKEN", token)
	hub := githubtest.New(t, token)
	hub.Permissions["andres"] = "write"
	st := storetest.Store(t)
	cfg, err := config.Load([]byte("repo: /x\ngithub:\n  repo: pg/bot\n  api_url: "+hub.URL()+"\n"), "../../configs/pgbisect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	const class = "intake-test" // no daemon of these tests takes its jobs
	d, err := newDispatcher(cfg, st, queue, class, nil)
	if err != nil || d == nil {
		t.Fatalf("dispatcher: %v", err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hub.Comment(901, 7, "andres", "@pgbisect bisect copy-single --good REL_15_0 --bad REL_16_0 --metric copy_time", t0)
	for range 2 {
		if _, err := d.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	classJobs := func() []jobs.Job {
		all, err := queue.Jobs(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []jobs.Job
		for _, j := range all {
			if j.Class == class {
				out = append(out, j)
			}
		}
		return out
	}
	js := classJobs()
	if len(js) != 1 || js[0].Kind != "bisect" || !strings.Contains(string(js[0].Args), `"github:andres"`) {
		t.Fatalf("jobs of class %s: %+v", class, js)
	}
	id := js[0].ID
	hub.Comment(902, 7, "andres", "@pgbisect status", t0.Add(time.Minute))
	hub.Comment(903, 7, "andres", "@pgbisect cancel "+strconv.FormatInt(id, 10), t0.Add(2*time.Minute))
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	hub.Lock()
	var replies []string
	for _, r := range hub.Replies {
		replies = append(replies, r)
	}
	hub.Unlock()
	all := strings.Join(replies, "\n")
	for _, want := range []string{"@andres queued as job " + strconv.FormatInt(id, 10) + ": bisect --scenario ",
		"job " + strconv.FormatInt(id, 10) + " bisect (intake-test), available", "@andres job " + strconv.FormatInt(id, 10) + " (bisect) is cancelled."} {
		if !strings.Contains(all, want) {
			t.Errorf("no answer %q in:\n%s", want, all)
		}
	}
	if js := classJobs(); len(js) != 1 || js[0].State != "cancelled" {
		t.Errorf("after cancel: %+v", js)
	}
}
