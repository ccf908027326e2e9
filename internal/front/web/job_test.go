package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestJobPage: the page GitHub replies link to shows a queued job, the
// bisection its events name and its last lines; a job the queue does not
// have is a 404, in HTML and JSON.
func TestJobPage(t *testing.T) {
	st := storetest.Store(t)
	ctx := context.Background()
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	row, err := queue.Enqueue(ctx, app.CompareRequest{Scenario: "copy-single", A: "REL_16_0", B: "REL_17_0"}, "web-job-page")
	if err != nil {
		t.Fatal(err)
	}
	j, err := queue.Job(ctx, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []app.Event{
		{Kind: app.KindStart, At: time.Now(), Bisection: "b-job-page", Text: "bisection b-job-page: 12 commits"},
		{Kind: app.KindVerdict, At: time.Now(), Text: "endpoints: regression +12.0%"},
	} {
		payload, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendEvent(ctx, jobs.EventsOf(j.Key), string(ev.Kind), payload); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := New(st, Config{Jobs: queue})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := noRedirect(ts)

	resp, body := do(t, c, "GET", fmt.Sprintf("%s/jobs/%d", ts.URL, row.ID), "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("job page: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{fmt.Sprintf("Job %d: compare", row.ID), `href="/bisections/b-job-page"`,
		"endpoints: regression &#43;12.0%", `data-job="` + jobs.EventsOf(j.Key) + `"`, "copy-single"} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q:\n%s", want, body)
		}
	}
	resp, body = do(t, c, "GET", fmt.Sprintf("%s/api/jobs/%d", ts.URL, row.ID), "", nil)
	var v struct {
		Job struct {
			ID   int64  `json:"id"`
			Kind string `json:"kind"`
		} `json:"job"`
		Bisection string `json:"bisection"`
		Lines     []struct {
			Text string `json:"text"`
		} `json:"lines"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("api: %d %v\n%s", resp.StatusCode, err, body)
	}
	if v.Job.ID != row.ID || v.Job.Kind != "compare" || v.Bisection != "b-job-page" || len(v.Lines) != 2 {
		t.Errorf("api: %+v", v)
	}
	_, body = do(t, c, "GET", fmt.Sprintf("%s/jobs/%d", ts.URL, row.ID), "", nil)
	if strings.Count(body, fmt.Sprintf("Job %d: compare", row.ID)) != 2 || strings.Count(body, "<h1>") != 1 { // <title> and <h1>
		t.Errorf("the job page's heading is not shown once:\n%s", body)
	}
	for _, want := range []string{"<th>scenario</th><td>copy-single</td>", "<th>revisions</th><td>REL_16_0 vs REL_17_0</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks the request's field %q:\n%s", want, body)
		}
	}
	// A job without events yet has no lines, an empty list.
	empty, err := queue.Enqueue(ctx, app.CompareRequest{Scenario: "copy-single", A: "REL_16_0", B: "REL_16_1"}, "web-job-page")
	if err != nil {
		t.Fatal(err)
	}
	if _, body := do(t, c, "GET", fmt.Sprintf("%s/api/jobs/%d", ts.URL, empty.ID), "", nil); !strings.Contains(body, `"lines":[]`) {
		t.Errorf("a job without events: %s", body)
	}
	for _, u := range []string{"/jobs/999999999", "/api/jobs/999999999"} {
		if resp, body := do(t, c, "GET", ts.URL+u, "", nil); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404\n%s", u, resp.StatusCode, body)
		}
	}
	// A long job: the page reads its first events for the bisection and
	// its last 30 for the lines, not everything between.
	for i := range 60 {
		payload, _ := json.Marshal(app.Event{Kind: app.KindStatus, At: time.Now(), Text: fmt.Sprintf("sample %d", i)})
		if _, err := st.AppendEvent(ctx, jobs.EventsOf(j.Key), string(app.KindStatus), payload); err != nil {
			t.Fatal(err)
		}
	}
	v.Lines, v.Bisection = nil, ""
	if _, body := do(t, c, "GET", fmt.Sprintf("%s/api/jobs/%d", ts.URL, row.ID), "", nil); json.Unmarshal([]byte(body), &v) != nil ||
		len(v.Lines) != jobLines || v.Lines[jobLines-1].Text != "sample 59" || v.Lines[0].Text != fmt.Sprintf("sample %d", 60-jobLines) || v.Bisection != "b-job-page" {
		t.Errorf("a long job: bisection %q, %d lines, %+v", v.Bisection, len(v.Lines), v.Lines)
	}
	// The overview links the queued job to its page.
	if _, body := do(t, c, "GET", ts.URL+"/", "", nil); !strings.Contains(body, fmt.Sprintf(`href="/jobs/%d"`, row.ID)) {
		t.Errorf("overview does not link job %d:\n%s", row.ID, body)
	}
}
