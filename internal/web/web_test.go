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

	"github.com/pgbisect/pgbisect/internal/jobs"
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
		{"/nights/" + itoa(step.ID) + "?" + seriesPath(f)[len("/series?"):], []string{f.Branch, "key-" + step.Commit, "1m35s", "850"}},
		{"/commits/" + step.Commit, []string{"5 samples", "key-" + step.Commit, f.Scenario}},
		{"/bisections", []string{f.BisectionID}},
		{"/bisections/" + f.BisectionID, []string{`data-phase="done"`, `data-outcome="found"`, short(f.Culprit),
			`class="role-culprit"`, `id="events"`, "<b>saved</b>", "phase=done"}},
		{"/findings/" + f.FindingID, []string{f.IssueURL, "Make COPY slower", "<table>",
			`src="/findings/` + f.FindingID + `/plots/bisection.png"`, `/plots/series.png"`}},
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
		})
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
		{"/nights/x", 404, "ids are numbers"},
		{"/nights/999999999", 404, "nightly run 999999999"},
		{"/commits/0000000000000000000000000000000000000000", 404, "no measurement of commit"},
		{"/series?scenario=nope&metric=tps", 404, "no nightly series"},
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
		`pgbisect_builds{status="ok"}`, "pgbisect_samples", "pgbisect_findings_pending", "pgbisect_last_nightly_timestamp_seconds"} {
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
	rctx2, cancel2 := context.WithCancel(ctx)
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
	resp, err := http.Get("http://" + ln.Addr().String() + "/events/serve-stop")
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
