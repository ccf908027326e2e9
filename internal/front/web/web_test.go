package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// newTestServer serves the dashboard over the package's results store.
func newTestServer(t *testing.T) (*httptest.Server, *store.Store) {
	t.Helper()
	st := storetest.Store(t)
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(st, Config{Jobs: queue})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, st
}

// get fetches path and returns the status and body.
func get(t *testing.T, ts *httptest.Server, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

func seriesPath(f *fixture) string {
	return "/series?" + url.Values{"scenario": {f.Scenario}, "metric": {f.Metric}, "point": {f.Point}}.Encode()
}

func TestPages(t *testing.T) {
	ts, st := newTestServer(t)
	f := seed(t, st, "pages")
	step := f.Nights[f.Step]
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/", []string{f.Host, "Test CPU", f.FindingID, f.BisectionID, "waiting for progress",
			"<td>" + f.Machine + "</td><td>web-pages</td><td>4242</td>", fmt.Sprintf("job %d <b>bisect</b>", f.Running),
			"<td>" + f.Idle + "</td><td>web-pages</td><td>4242</td>\n<td>stopped ",
			`data-job="` + f.RunningEvents + `"`, "v3", "-15.0%", short(step.Commit)}},
		{"/series", []string{f.Scenario, "scenario=" + f.Scenario}},
		{seriesPath(f), []string{`id="series-data"`, step.Commit, `"change_points":[{"index":10`, f.FindingID,
			`"culprits":[{"index":10`}},
		{"/nights/" + itoa(step.ID) + "?" + seriesPath(f)[len("/series?"):], []string{f.Branch, "key-" + step.Commit, "10.76 s", "850"}},
		{"/commits/" + step.Commit, []string{"6 samples", "key-" + step.Commit, f.Scenario, "<td>10.76 s</td>", "<td>300,000</td>"}},
		{"/series?scenario=never-measured&metric=copy_time", []string{`id="no-nights"`, "No nightly pass has measured this series yet"}},
		{"/bisections", []string{f.BisectionID}},
		{"/bisections/" + f.BisectionID, []string{`data-phase="done"`, `data-outcome="found"`, short(f.Culprit),
			`class="role-culprit"`, `id="events"`, "<b>saved</b>", "phase=done"}},
		{"/findings/" + f.FindingID, []string{f.IssueURL, "Make COPY slower", "<table>",
			`src="/findings/` + f.FindingID + `/plots/bisection.png"`, `/plots/series.png"`, `href="` + f.FlameGraph + `"`}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, body, h := get(t, ts, tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d\n%s", tc.path, code, body)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("Content-Type %q", ct)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: no %q in\n%s", tc.path, w, body)
				}
			}
			// Loose ends none of the pages may have: a number with an
			// exponent or a raw duration, an empty log column, a finished
			// bisection's pending comparison, a server path or a job's
			// raw arguments in the queue.
			for _, bad := range []string{"e+0", "10.764147s", "<th>log</th>", "<td>pending</td>", "/srv/pgbisect", "&#34;key&#34;", "&#34;request&#34;"} {
				if strings.Contains(body, bad) {
					t.Errorf("GET %s shows %q:\n%s", tc.path, bad, body)
				}
			}
		})
	}
	// The queued job's request, field by field.
	_, body, _ := get(t, ts, "/")
	want := fmt.Sprintf(`<td><a href="/jobs/%d">%d</a></td><td>bisect</td><td>copy-pages</td><td>v2..v3</td><td>copy_time</td><td>clients=4</td><td>%s</td>`,
		f.Queued, f.Queued, f.Requester)
	if !strings.Contains(body, want) {
		t.Errorf("the queue does not list the request's fields %s:\n%s", want, body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestSeriesJSON(t *testing.T) {
	ts, st := newTestServer(t)
	f := seed(t, st, "api")
	code, body, _ := get(t, ts, "/api/series?"+seriesPath(f)[len("/series?"):])
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var d SeriesData
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Nights) != fixtureNights || d.Nights[0].N != 5 || d.Nights[0].NightlyID != f.Nights[0].ID {
		t.Fatalf("nights: %+v", d.Nights)
	}
	if m := d.Nights[f.Step].Median; m < 840 || m > 860 {
		t.Errorf("median of night %d = %v, want about 850", f.Step, m)
	}
	if len(d.ChangePoints) != 1 || d.ChangePoints[0].Index != f.Step {
		t.Errorf("change points %+v, want one at %d", d.ChangePoints, f.Step)
	}
	if len(d.Culprits) != 1 || d.Culprits[0].Index != f.Step || d.Culprits[0].FindingID != f.FindingID {
		t.Errorf("culprits %+v, want finding %s at %d", d.Culprits, f.FindingID, f.Step)
	}
}

func TestBadRequests(t *testing.T) {
	ts, st := newTestServer(t)
	f := seed(t, st, "bad")
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/no/such/page", 404, "no page /no/such/page"},
		{"/bisections/no-such-bisection", 404, "no such bisection: no-such-bisection"},
		{"/findings/no-such-finding", 404, "finding no-such-finding"},
		{"/findings/" + f.FindingID + "/plots/other.png", 404, "has no plot"},
		{"/nights/x", 400, "ids are numbers"},
		{"/jobs/abc", 400, "job ids are numbers"},
		{"/api/jobs/abc", 400, "job ids are numbers"},
		{"/api/bisections?limit=0", 400, "limit="},
		{"/api/findings?limit=x", 400, "limit="},
		{"/api/bisections?after=no-such-bisection", 400, "after="},
		{"/api/findings?after=no-such-finding", 400, "after="},
		{"/nights/999999999", 404, "nightly run 999999999"},
		{"/commits/0000000000000000000000000000000000000000", 404, "no measurement of commit"},
		{"/api/series?scenario=nope&metric=tps", 404, "no nightly series"},
		{"/api/series?scenario=x", 400, `query parameter \"metric\" is required`},
		{"/events/x?after=-1", 400, "after="},
	} {
		code, body, _ := get(t, ts, tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, want %d with %q:\n%s", tc.path, code, tc.code, tc.want, body)
		}
	}
}

func TestAssetsAndMetrics(t *testing.T) {
	ts, st := newTestServer(t)
	seed(t, st, "metrics")
	for path, ct := range map[string]string{
		"/favicon.ico":                           "image/svg+xml",
		"/static/vendor/uplot/uPlot.iife.min.js": "text/javascript",
		"/static/app.js":                         "text/javascript",
		"/static/style.css":                      "text/css",
	} {
		code, body, h := get(t, ts, path)
		if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), ct) || len(body) == 0 {
			t.Errorf("GET %s: %d %q (%d bytes)", path, code, h.Get("Content-Type"), len(body))
		}
	}
	// A queued job, which no daemon of these tests takes.
	q := newTestQueue(t, st, "metrics-test")
	if _, err := q.enqueue(nil)(context.Background(), Request{Kind: "bisect", Scenario: "copy-single", Good: "a", Bad: "b"}); err != nil {
		t.Fatal(err)
	}
	n, err := st.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ := get(t, ts, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, w := range []string{"pgbisect_store_up 1", `pgbisect_jobs{status="running"}`, "pgbisect_queue_depth",
		`pgbisect_builds{status="ok"}`, "pgbisect_samples", "pgbisect_findings_pending", "pgbisect_last_nightly_timestamp_seconds", "pgbisect_event_streams 0"} {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics has no %q", w)
		}
	}
	// The counts are the store's, the jobs' by status.
	if n.Jobs["queued"] < 1 {
		t.Errorf("the store counts %d queued jobs after one was queued: %v", n.Jobs["queued"], n.Jobs)
	}
	for _, st := range store.JobStatuses {
		if w := "\npgbisect_jobs{status=\"" + st + "\"} " + itoa(n.Jobs[st]) + "\n"; !strings.Contains(body, w) {
			t.Errorf("/metrics has no %q", w[1:])
		}
	}
	if w := "\npgbisect_queue_depth " + itoa(n.Jobs["queued"]) + "\n"; !strings.Contains(body, w) {
		t.Errorf("/metrics has no %q", w[1:])
	}
	if !strings.Contains(body, "\npgbisect_samples "+itoa(n.Samples)+"\n") {
		t.Errorf("/metrics samples differ from the store's %d", n.Samples)
	}
}

func TestFindingPlotIsPNG(t *testing.T) {
	ts, st := newTestServer(t)
	f := seed(t, st, "plot")
	code, body, h := get(t, ts, "/findings/"+f.FindingID+"/plots/series.png")
	if code != 200 || h.Get("Content-Type") != "image/png" || !strings.HasPrefix(body, "\x89PNG") {
		t.Fatalf("%d %q %q", code, h.Get("Content-Type"), body[:min(len(body), 8)])
	}
	// The flame graph comes from the store, which notify.Publish gave it.
	if code, body, h := get(t, ts, f.FlameGraph); code != 200 || h.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(body, "<svg") {
		t.Fatalf("flame graph: %d %q %q", code, h.Get("Content-Type"), body[:min(len(body), 8)])
	}
	// A finding published before the store kept flame graphs: no link,
	// but where the file is.
	if _, err := st.Pool().Exec(context.Background(), "DELETE FROM finding_files WHERE finding_id = $1", f.FindingID); err != nil {
		t.Fatal(err)
	}
	_, page, _ := get(t, ts, "/findings/"+f.FindingID)
	if strings.Contains(page, f.FlameGraph) || !strings.Contains(page, "is not in the results store") || !strings.Contains(page, "STATE/reports/"+f.FindingID) {
		t.Errorf("a finding without its flame graph in the store:\n%s", page)
	}
	if code, _, _ := get(t, ts, f.FlameGraph); code != 404 {
		t.Errorf("a flame graph not in the store: %d", code)
	}
}

// TestEventStream follows a job's stored events over SSE: those stored
// before, then one appended while the stream is open, then resumes after
// the last one seen with Last-Event-ID.
func TestEventStream(t *testing.T) {
	ts, st := newTestServer(t)
	ctx := context.Background()
	job := "sse-" + t.Name()
	if _, err := st.AppendEvent(ctx, job, "build", json.RawMessage(`{"message": "building abc"}`)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", ts.URL+"/events/"+job, nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	next := func() (id string, ev eventView) {
		t.Helper()
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &ev); err != nil {
					t.Fatal(err)
				}
			case line == "" && id != "":
				return id, ev
			}
		}
	}
	if id, ev := next(); id != "1" || ev.Kind != "build" || ev.Text != "building abc" {
		t.Fatalf("first event: %s %+v", id, ev)
	}
	// Appended by a second store, as another process would.
	other, err := store.Open(ctx, store.Config{URL: st.Cluster().URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.AppendEvent(ctx, job, "sample", json.RawMessage(`{"done": 3, "of": 10}`)); err != nil {
		t.Fatal(err)
	}
	if id, ev := next(); id != "2" || ev.Kind != "sample" || ev.Text != "done=3 of=10" {
		t.Fatalf("second event: %s %+v", id, ev)
	}
	cancel()

	// A reconnecting browser sends Last-Event-ID.
	if _, err := st.AppendEvent(ctx, job, "culprit", nil); err != nil {
		t.Fatal(err)
	}
	// (Bounded: a stream the server does not end fails the test, not hangs it.)
	rctx2, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	req, _ = http.NewRequestWithContext(rctx2, "GET", ts.URL+"/events/"+job, nil)
	req.Header.Set("Last-Event-ID", "2")
	resp2, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	r = bufio.NewReader(resp2.Body)
	if id, ev := next(); id != "3" || ev.Kind != "culprit" {
		t.Fatalf("after reconnecting: %s %+v", id, ev)
	}

	// The job's last event ends the stream: the server closes it.
	if _, err := other.AppendEvent(ctx, job, "done", json.RawMessage(`{"kind": "done"}`)); err != nil {
		t.Fatal(err)
	}
	if id, ev := next(); id != "4" || ev.Kind != "done" {
		t.Fatalf("the last event: %s %+v", id, ev)
	}
	if rest, err := io.ReadAll(r); err != nil || strings.TrimSpace(string(rest)) != "" {
		t.Errorf("after the last event the stream sent %q, %v; want its end", rest, err)
	}
	// A browser reconnecting after it is told not to (204); one that
	// missed events gets them and the end.
	for _, tc := range []struct {
		after string
		code  int
	}{{"4", http.StatusNoContent}, {"3", http.StatusOK}} {
		req, _ = http.NewRequestWithContext(rctx2, "GET", ts.URL+"/events/"+job, nil)
		req.Header.Set("Last-Event-ID", tc.after)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body) // returns: the server ends the stream
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || (tc.code == 200) != strings.Contains(string(body), "id: 4\n") {
			t.Errorf("reconnecting after event %s: %d %q %v", tc.after, resp.StatusCode, body, err)
		}
	}
}

// TestListings pages through /api/bisections and /api/findings with the
// "next" each page gives.
func TestListings(t *testing.T) {
	ts, st := newTestServer(t)
	f := seed(t, st, "listing")
	other := newSimBisection(t, st, "listing2", 0)
	if err := other.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Bisections []struct {
			ID, Status, Outcome, Scenario, Metric, Good, Bad, URL string
		} `json:"bisections"`
		Findings []struct {
			ID, Kind, Scenario, URL string
			Culprits, Issues        []string
		} `json:"findings"`
		Next string `json:"next"`
	}
	read := func(path string) page {
		t.Helper()
		code, body, h := get(t, ts, path)
		var p page
		if err := json.Unmarshal([]byte(body), &p); code != 200 || err != nil || h.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %v\n%s", path, code, err, body)
		}
		return p
	}
	// Every bisection once, newest first, one a page.
	seen := map[string]int{}
	var ids []string
	for path, pages := "/api/bisections?limit=1", 0; path != ""; pages++ {
		p := read(path)
		if len(p.Bisections) > 1 || pages > 1000 {
			t.Fatalf("GET %s: %d bisections on a page of 1", path, len(p.Bisections))
		}
		for _, b := range p.Bisections {
			seen[b.ID]++
			ids = append(ids, b.ID)
			if b.ID == f.BisectionID && (b.Status != "done" || b.Outcome != "found" || b.Scenario != "copy-listing" ||
				b.Metric != "elapsed" || len(b.Good) != 40 || b.URL != "/api/bisections/"+b.ID) {
				t.Errorf("the fixture's bisection is listed as %+v", b)
			}
		}
		path = p.Next
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("bisection %s listed %d times", id, n)
		}
	}
	if seen[f.BisectionID] != 1 || seen[other.state.ID] != 1 {
		t.Errorf("the listing lacks %s or %s: %v", f.BisectionID, other.state.ID, ids)
	}
	if p := read("/api/bisections?limit=2"); len(p.Bisections) != 2 || p.Bisections[0].ID != ids[0] || p.Bisections[1].ID != ids[1] {
		t.Errorf("a page of 2: %+v, want %v first", p.Bisections, ids[:2])
	}
	fs := read("/api/findings")
	var found bool
	for _, fi := range fs.Findings {
		if fi.ID == f.FindingID {
			found = true
			if fi.Kind != "regression" || fi.Scenario != f.Scenario || len(fi.Culprits) != 1 || len(fi.Issues) != 1 || fi.Issues[0] != f.IssueURL ||
				fi.URL != "/findings/"+f.FindingID {
				t.Errorf("the fixture's finding is listed as %+v", fi)
			}
		}
	}
	if !found {
		t.Errorf("/api/findings lacks %s: %+v", f.FindingID, fs.Findings)
	}
	if last := read("/api/findings?limit=1&after=" + url.QueryEscape(fs.Findings[len(fs.Findings)-1].ID)); len(last.Findings) != 0 || last.Next != "" {
		t.Errorf("after the last finding: %+v", last)
	}
}

// TestServeStopsWithOpenStream: cancelling Serve's context ends it even
// while a browser holds an event stream open.
func TestServeStopsWithOpenStream(t *testing.T) {
	st := storetest.Store(t)
	srv, err := New(st, Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); host != "127.0.0.1" {
		t.Errorf("listening on %s", ln.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	// A stream of a job that exists: an unknown job's is a 404.
	if _, err := st.AppendEvent(context.Background(), "serve-stop-"+t.Name(), "note", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/events/serve-stop-" + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil { // the stream is open
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestDefaultAddrIsLoopback(t *testing.T) {
	host, _, err := net.SplitHostPort(DefaultAddr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("DefaultAddr %q is not a loopback address", DefaultAddr)
	}
}

// TestSeriesOfClass: nightly series are per machine class; a class's series
// is listed with its class and read with ?class=.
func TestSeriesOfClass(t *testing.T) {
	ts, st := newTestServer(t)
	f := seed(t, st, "klass")
	if _, err := st.Pool().Exec(context.Background(), "UPDATE nightly_runs SET machine_class = 'bench-klass' WHERE branch = $1", f.Branch); err != nil {
		t.Fatal(err)
	}
	q := seriesPath(f)[len("/series?"):]
	_, list, _ := get(t, ts, "/series")
	if !strings.Contains(list, "/series?"+strings.ReplaceAll("class=bench-klass&"+q, "&", "&amp;")) || !strings.Contains(list, "<td>bench-klass</td>") {
		t.Errorf("the series list does not link the class's series:\n%s", list)
	}
	if code, body, _ := get(t, ts, "/api/series?"+q); code != 404 || !strings.Contains(body, `machine class \"default\"`) {
		t.Errorf("the default class's series: %d %s", code, body)
	}
	code, body, _ := get(t, ts, "/api/series?class=bench-klass&"+q)
	var d SeriesData
	if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil || d.Class != "bench-klass" || len(d.Nights) != fixtureNights {
		t.Fatalf("the class's series: %d %v %+v", code, err, d)
	}
	if code, body, _ := get(t, ts, "/series?class=bench-klass&"+q); code != 200 || !strings.Contains(body, "on bench-klass</h1>") {
		t.Errorf("the class's series page: %d\n%s", code, body)
	}
}

// TestBisectionOfQueueJob: the page of a bisection a queue job runs follows
// the job's event stream (the job records its events there, not under the
// bisection's ID), and once the bisection is done the page follows nothing.
func TestBisectionOfQueueJob(t *testing.T) {
	ts, st := newTestServer(t)
	ctx := context.Background()
	sim := newSimBisection(t, st, "queued", 3)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sim.run(rctx) }()
	select {
	case <-sim.paused:
	case err := <-done:
		t.Fatalf("the bisection ended before pausing: %v", err)
	}
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	row, err := queue.Enqueue(ctx, app.BisectRequest{Scenario: "copy-single", Good: "v1", Bad: "v2"}, "web-queued-bisection")
	if err != nil {
		t.Fatal(err)
	}
	defer queue.Cancel(ctx, row.ID) //nolint:errcheck // no daemon takes this class
	if _, err := st.Pool().Exec(ctx, "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1", row.ID); err != nil {
		t.Fatal(err)
	}
	var c jobs.Common
	if err := json.Unmarshal(row.EncodedArgs, &c); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(app.Event{Kind: app.KindStart, At: time.Now(), Bisection: sim.state.ID, Text: "bisection " + sim.state.ID})
	if _, err := st.AppendEvent(ctx, jobs.EventsOf(c.Key), string(app.KindStart), payload); err != nil {
		t.Fatal(err)
	}
	_, body, _ := get(t, ts, "/bisections/"+sim.state.ID)
	if !strings.Contains(body, `data-job="`+jobs.EventsOf(c.Key)+`"`) || strings.Contains(body, "data-ended") {
		t.Errorf("the running bisection's page does not follow its job's stream %s:\n%s", jobs.EventsOf(c.Key), body)
	}
	close(sim.resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, body, _ := get(t, ts, "/bisections/"+sim.state.ID); !strings.Contains(body, "data-ended") {
		t.Errorf("the finished bisection's page still follows a stream:\n%s", body)
	}
}
