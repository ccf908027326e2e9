package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/config"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/notify/githubtest"
	"github.com/pgbisect/pgbisect/store/storetest"
)

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
	cfg, err := config.Load([]byte("repo: /x\ngithub:\n  repo: pg/bot\n  api_url: "+hub.URL()+"\n"), "../../../configs/pgbisect.yaml")
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
	if p, err := queue.Pending(ctx, id); err != nil || !p {
		t.Errorf("queued job pending: %v %v", p, err)
	}
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
	if p, err := queue.Pending(ctx, id); err != nil || p {
		t.Errorf("cancelled job pending: %v %v", p, err)
	}
	if p, err := queue.Pending(ctx, 1<<40); err != nil || p {
		t.Errorf("a job River no longer has is pending: %v %v", p, err)
	}
}

const testPatch = "diff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-int a;\n+int a, z;\n"

// TestCommentQueuesPatchJob: `compare SCENARIO BASE --patch URL` fetches
// the attachment from an allowlisted host (here a local server, put on the
// allowlist by the config) and `--pr N` the pull request's diff from
// GitHub; the River job carries the patches, and its events stream is
// recorded for the answer. A host off the list and a patch over the cap
// are refused in the thread, and nothing is queued for them.
func TestCommentQueuesPatchJob(t *testing.T) {
	const token = "ghp_cliPatchTOKEN"
	t.Setenv("GITHUB_TOKEN", token)
	hub := githubtest.New(t, token)
	hub.Permissions["andres"] = "write"
	big := testPatch + strings.Repeat("+x\n", 800)
	hub.Pulls[12] = testPatch
	hub.Pulls[13] = big
	fetched := map[string]int{}
	var mu sync.Mutex
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/files/fix.patch":
			w.Write([]byte(testPatch))
		case "/files/big.patch":
			w.Write([]byte(big))
		default:
			http.NotFound(w, r)
		}
	}))
	defer files.Close()
	st := storetest.Store(t)
	cfg, err := config.Load([]byte("repo: /x\ngithub:\n  repo: pg/bot\n  api_url: "+hub.URL()+"\n  patch_hosts: ["+files.URL+"/files]\n  max_patch_kib: 1\n"),
		"../../../configs/pgbisect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	const class = "intake-patch-test"
	d, err := newDispatcher(cfg, st, queue, class, nil)
	if err != nil || d == nil {
		t.Fatalf("dispatcher: %v", err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	hub.Comment(951, 8, "andres", "@pgbisect compare copy-single REL_15_0 --patch "+files.URL+"/files/fix.patch", t0)
	hub.Comment(952, 8, "andres", "@pgbisect compare copy-single REL_15_0 --pr 12", t0.Add(time.Minute))
	hub.Comment(953, 8, "andres", "@pgbisect compare copy-single REL_15_0 --patch https://example.org/fix.patch", t0.Add(2*time.Minute))
	hub.Comment(954, 8, "andres", "@pgbisect compare copy-single REL_15_0 --patch "+files.URL+"/files/big.patch", t0.Add(3*time.Minute))
	hub.Comment(955, 8, "andres", "@pgbisect compare copy-single REL_15_0 --pr 13", t0.Add(4*time.Minute))
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := queue.Jobs(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []app.CompareRequest
	for _, j := range all {
		if j.Class != class {
			continue
		}
		r, err := jobRequest(j)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := r.(app.CompareRequest)
		got = append(got, c)
		var events string
		if err := st.Pool().QueryRow(ctx, "SELECT events FROM github_commands WHERE job_id = $1", strconv.FormatInt(j.ID, 10)).Scan(&events); err != nil || events != jobs.EventsOf(j.Key) {
			t.Errorf("job %d: events stream %q (%v), want %q", j.ID, events, err, jobs.EventsOf(j.Key))
		}
	}
	if len(got) != 2 || got[0].A != "REL_15_0" || got[0].B != "" || len(got[0].PatchData) != 1 || got[0].PatchData[0].Name != "fix.patch" ||
		string(got[0].PatchData[0].Data) != testPatch || len(got[1].PatchData) != 1 || got[1].PatchData[0].Name != "pull-12.diff" ||
		string(got[1].PatchData[0].Data) != testPatch {
		t.Fatalf("queued compare requests: %+v", got)
	}
	hub.Lock()
	diffs := hub.Diffs
	var replies []string
	for _, r := range hub.Replies {
		replies = append(replies, r)
	}
	hub.Unlock()
	if diffs != 2 {
		t.Errorf("%d pull request diffs fetched, want 2", diffs)
	}
	text := strings.Join(replies, "\n")
	for _, want := range []string{
		"compare copy-single REL_15_0 + fix.patch (" + strconv.Itoa(len(testPatch)) + " bytes).",
		"compare copy-single REL_15_0 + pull-12.diff (",
		"@andres compare --patch: patch refused: example.org is not a host patches are fetched from (allowed: " + files.URL + "/files)",
		"@andres compare --patch: patch refused: " + files.URL + "/files/big.patch is", "more than the 1 KiB a patch may be",
		"@andres compare --pr: patch refused: the diff of pull request #13 is 2 KiB, more than the 1 KiB a patch may be",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no answer %q in:\n%s", want, text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fetched["/files/fix.patch"] != 1 || len(fetched) != 2 {
		t.Errorf("attachments fetched: %v", fetched)
	}
}
