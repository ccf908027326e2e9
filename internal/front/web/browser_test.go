package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// The browser tests drive Debian's headless Chromium over the DevTools
// protocol (chromedp) against the dashboard served over a real results
// store. Without Chromium they are skipped, except under CI=true, where
// that is a broken setup and fails.

// chromium returns the path of a Chromium binary.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	citest.Unavailable(t, "no chromium on PATH: apt-get install chromium (scripts/setup-debian.sh installs it)")
	return ""
}

// browser is one headless Chromium tab that records the page's errors.
type browser struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	// Bound the whole test: a page that never gets what it waits for fails
	// the test instead of hanging it.
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	b := &browser{ctx: ctx}
	// Exceptions, console.error and browser log errors (a failed load).
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || string(m.Type) == "error" {
				b.mu.Lock()
				b.errs = append(b.errs, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs steps in the tab.
func (b *browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// value runs a in the tab and returns its value.
func value[T any](t *testing.T, b *browser, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// noErrors fails t if the page logged an error or threw.
func (b *browser) noErrors(t *testing.T, page string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		t.Errorf("%s: %s", page, e)
	}
	b.errs = nil
}

// screenshot saves the page under the test's artifact directory.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	png := value(t, b, chromedp.FullScreenshot(100))
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

type css = chromedp.CSS

// point is where a chart draws one of its values, in page coordinates.
type point struct{ X, Y float64 }

func chartPoint(t *testing.T, b *browser, chart string, i int) point {
	t.Helper()
	return value(t, b, chromedp.Evaluate[point](fmt.Sprintf(`(() => { const u = window.%s, r = u.over.getBoundingClientRect();
		return {X: r.left + u.valToPos(u.data[0][%d], "x"), Y: r.top + u.valToPos(u.data[3][%d], "y")}; })()`, chart, i, i)))
}

// TestBrowserPages opens every page in Chromium, checks what it shows and
// that it logged no error, hovers and clicks the series chart.
func TestBrowserPages(t *testing.T) {
	ts, st := newTestServer(t)
	b := newBrowser(t)
	f := seed(t, st, "browser")

	b.do(t, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(css("#machines")))
	text := value(t, b, chromedp.Text(css("main")))
	for _, w := range []string{f.Host, f.FindingID, f.BisectionID, "on worker-browser (web-browser)"} {
		if !strings.Contains(text, w) {
			t.Errorf("overview: no %q in\n%s", w, text)
		}
	}
	// The running job's progress arrives live from its event stream.
	if _, err := st.AppendEvent(context.Background(), f.RunningEvents, "sample",
		[]byte(`{"message": "sample 4 of 10 of 0a07fc4012"}`)); err != nil {
		t.Fatal(err)
	}
	// (Other tests' running jobs share the store: this fixture's is found by
	// its stream.)
	sel := fmt.Sprintf(`#running .live-job[data-job=%q]`, f.RunningEvents)
	b.do(t, chromedp.WaitReady(css(sel)))
	live := value(t, b, chromedp.Poll[string](fmt.Sprintf(`(() => { const t = document.querySelector(%q).textContent;
		return t.startsWith("sample:") ? t : null; })()`, sel)))
	if live != "sample: sample 4 of 10 of 0a07fc4012" {
		t.Errorf("the running job shows %q", live)
	}
	b.screenshot(t, "overview")
	b.noErrors(t, "overview")

	// The series chart: hover a night, read the tooltip, click it.
	b.do(t, chromedp.Navigate(ts.URL+seriesPath(f)), chromedp.WaitVisible(css("#chart canvas")))
	for _, i := range []int{3, f.Step} {
		pos := chartPoint(t, b, "pgbChart", i)
		b.do(t, chromedp.MouseEvent(chromedp.MouseMoved, pos.X, pos.Y),
			chromedp.WaitReady(css(fmt.Sprintf(`#hover[data-index="%d"]`, i))))
		text := value(t, b, chromedp.Text(css("#hover")))
		n := f.Nights[i]
		if !strings.Contains(text, "commit "+short(n.Commit)) || !strings.Contains(text, n.Started.Format("2006-01-02")) ||
			!strings.Contains(text, "median") || !strings.Contains(text, "spread") {
			t.Errorf("hovering night %d shows %q, want its commit %s, date, median and spread", i, text, short(n.Commit))
		}
		if i == f.Step {
			b.screenshot(t, "series")
			b.do(t, chromedp.MouseClickXY(pos.X, pos.Y), chromedp.WaitVisible(css("table.samples")))
			if h1, want := value(t, b, chromedp.Text(css("h1"))), fmt.Sprintf("Nightly run %d", n.ID); h1 != want {
				t.Errorf("clicking night %d opened %q, want %q", i, h1, want)
			}
		}
	}
	b.noErrors(t, "series")

	b.do(t, chromedp.Navigate(ts.URL+"/findings/"+f.FindingID), chromedp.WaitVisible(css("#report img")))
	if !value(t, b, chromedp.Poll[bool](`[...document.querySelectorAll("#report img")].every(i => i.complete) &&
		[...document.querySelectorAll("#report img")].every(i => i.naturalWidth > 0)`)) {
		t.Error("finding: a plot did not load")
	}
	if href := value(t, b, chromedp.AttributeValue(css("#issues a"), "href")); href.Value != f.IssueURL {
		t.Errorf("finding links to %q, want the issue %s", href.Value, f.IssueURL)
	}
	b.screenshot(t, "finding")
	b.noErrors(t, "finding")

	b.do(t, chromedp.Navigate(ts.URL+"/commits/"+f.Nights[0].Commit), chromedp.WaitVisible(css("table.samples")))
	b.noErrors(t, "commit")

	// The job page: its heading once, its request's fields, and its
	// arguments wrapped within the page.
	b.do(t, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", ts.URL, f.Queued)), chromedp.WaitVisible(css("#job-request")),
		chromedp.Click(css("details summary")), chromedp.WaitVisible(css("pre.args")))
	if n := value(t, b, chromedp.Evaluate[int](`document.querySelectorAll("h1").length`)); n != 1 {
		t.Errorf("the job page has %d headings", n)
	}
	if text := value(t, b, chromedp.Text(css("#job-request"))); !strings.Contains(text, "copy-browser") || !strings.Contains(text, f.Requester) ||
		strings.Contains(text, "/srv/") {
		t.Errorf("the job page lists the request as %q", text)
	}
	b.screenshot(t, "job")
	b.noErrors(t, "job")

	// Every same-origin link of these pages answers 200, in the browser.
	crawl(t, b, ts.URL, "/", "/findings/"+f.FindingID, "/bisections/"+f.BisectionID, fmt.Sprintf("/jobs/%d", f.Queued))

	// A 404 is a page (the browser logs the failed load, as expected).
	b.do(t, chromedp.Navigate(ts.URL+"/findings/nope"))
	if text := value(t, b, chromedp.Text(css("#error"))); !strings.Contains(text, "finding nope") {
		t.Errorf("404 page says %q", text)
	}
}

// crawl opens each of pages in the browser, then every same-origin link
// on it (once), and requires each to answer 200, load without an error,
// and fit the window's width (no line runs past the edge).
func crawl(t *testing.T, b *browser, base string, pages ...string) {
	t.Helper()
	seen := map[string]bool{}
	open := func(u, from string) {
		t.Helper()
		seen[u] = true
		resp := value(t, b, chromedp.NavigateResponse(u))
		if resp.Status != http.StatusOK {
			t.Errorf("%s (linked from %s): %d", u, from, resp.Status)
			b.forget()
			return
		}
		if strings.HasPrefix(resp.MimeType, "text/html") {
			if over := value(t, b, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`)); over > 0 {
				t.Errorf("%s runs %d pixels past the window's edge", u, over)
			}
		}
		b.noErrors(t, u)
	}
	// The links of every page first, then each once.
	var links []string
	from := map[string]string{}
	for _, p := range pages {
		open(base+p, "the test")
		hrefs := value(t, b, chromedp.Evaluate[[]string](`[...document.querySelectorAll("a[href]")].map(a => a.href.split("#")[0])`))
		for _, h := range hrefs {
			if _, ok := from[h]; ok || !strings.HasPrefix(h, base+"/") {
				continue
			}
			from[h] = p
			links = append(links, h)
		}
	}
	for _, h := range links {
		if !seen[h] {
			open(h, from[h])
		}
	}
	if len(links) < 20 {
		t.Errorf("the crawl followed %d links; the pages have more", len(links))
	}
	t.Logf("crawled %d links from %d pages", len(links), len(pages))
}

// TestBrowserBisectionLive opens the page of a bisection paused mid-way,
// lets it continue in another goroutine through a store of its own (as the
// daemon's process would), and watches the page follow it to its culprit
// over server-sent events.
func TestBrowserBisectionLive(t *testing.T) {
	ts, st := newTestServer(t)
	srv := ts.Config.Handler.(*Server)
	b := newBrowser(t)

	// The job runs on its own connection pool, as another process would.
	other, err := store.Open(context.Background(), store.Config{URL: st.Cluster().URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	job := newSimBisection(t, other, "live", 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.run(ctx) }()
	select {
	case <-job.paused:
	case err := <-done:
		t.Fatalf("the bisection ended before pausing: %v", err)
	}

	id := job.state.ID
	// Not queued (as from the command line), it shows as running on the
	// overview, its progress followed live.
	b.do(t, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(css("#running")))
	sel := fmt.Sprintf(`#running .elsewhere a[href="/bisections/%s"]`, id)
	if !value(t, b, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q) !== null`, sel))) {
		t.Errorf("the overview does not show bisection %s running", id)
	}
	if text := value(t, b, chromedp.Text(css("#running"))); strings.Contains(text, "Nothing is running") {
		t.Errorf("the overview says nothing is running while bisection %s measures:\n%s", id, text)
	}
	b.screenshot(t, "overview-running")
	b.noErrors(t, "overview")

	b.do(t, chromedp.Navigate(ts.URL+"/bisections/"+id), chromedp.WaitVisible(css("#bchart canvas")))
	value(t, b, chromedp.Poll[bool](`document.getElementById("stream").textContent === "live"`))
	before := value(t, b, chromedp.Evaluate[int](`document.querySelectorAll("#events li").length`))
	if phase := value(t, b, chromedp.AttributeValue(css("#phase"), "data-phase")); phase.Value == "done" || before == 0 {
		t.Fatalf("before resuming: phase %q, %d events", phase.Value, before)
	}
	b.screenshot(t, "bisection-paused")

	close(job.resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Wait until the page shows the state after the job's last event, so
	// no reload replaces what is read next.
	evs, err := st.Events(context.Background(), id, 0, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("the job's events: %d, %v", len(evs), err)
	}
	b.do(t, chromedp.WaitReady(css(fmt.Sprintf(`#live[data-loaded="%d"]`, evs[len(evs)-1].Seq))),
		chromedp.WaitReady(css(`#phase[data-phase="done"]`)))
	after := value(t, b, chromedp.Evaluate[int](`document.querySelectorAll("#events li").length`))
	if after <= before {
		t.Errorf("events listed: %d before, %d after the bisection finished", before, after)
	}
	culprit := value(t, b, chromedp.Text(css(`#commits tr.role-culprit td:nth-child(2)`)))
	if want := short(job.culprit()); culprit != want {
		t.Errorf("the page names culprit %q, want %s", culprit, want)
	}
	// Hovering the bisection chart names a commit.
	pos := chartPoint(t, b, "pgbBisectionChart", 0)
	b.do(t, chromedp.MouseEvent(chromedp.MouseMoved, pos.X, pos.Y), chromedp.WaitReady(css(`#bhover[data-commit]`)))
	if hover := value(t, b, chromedp.Text(css("#bhover"))); !strings.Contains(hover, short(job.hist.Commits[0].Hash)) {
		t.Errorf("hovering the first measured commit shows %q", hover)
	}
	// The job's last event ended the stream: the page says so, and the
	// server holds no stream open (the browser is idle).
	b.do(t, chromedp.WaitReady(css(`#stream[data-state="ended"]`)))
	for deadline := time.Now().Add(10 * time.Second); srv.streams.Load() != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d event streams still open after the bisection ended", srv.streams.Load())
		}
	}
	if n := value(t, b, chromedp.Evaluate[int](`document.querySelectorAll("#pairs td").length`)); n == 0 ||
		strings.Contains(value(t, b, chromedp.Text(css("#pairs"))), "pending") {
		t.Errorf("the finished bisection's comparisons:\n%s", value(t, b, chromedp.Text(css("#pairs"))))
	}
	b.screenshot(t, "bisection-done")
	b.noErrors(t, "bisection")
}

// forget drops the errors the page logged, for pages that are meant to
// fail (a 401 or 403 is logged as a failed load).
func (b *browser) forget() {
	b.mu.Lock()
	b.errs = nil
	b.mu.Unlock()
}

// TestBrowserRequestForm uses a private dashboard as a person would:
// refused without the token, signed in through the form, a comparison
// requested through the request form, which appears in the queue. A form
// on another site posting to the dashboard is refused, and so is a POST
// without a session.
func TestBrowserRequestForm(t *testing.T) {
	st := storetest.Store(t)
	const token = "browser-form-token-0123456789"
	const class = "web-browser-form" // no daemon of these tests takes its jobs
	queue := newTestQueue(t, st, class)
	enqueue := queue.enqueue(nil)
	srv, err := New(st, Config{Token: token, Private: true, Enqueue: EnqueueFunc(enqueue), Jobs: queue.q, Scenarios: []string{"copy-single"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close) // after the browser's cleanup closes its event streams
	queued := queue.jobs
	f := seed(t, st, "form")
	b := newBrowser(t)

	// Private: the finding's page is the sign-in form until signed in, and
	// then the finding.
	b.do(t, chromedp.Navigate(ts.URL+"/findings/"+f.FindingID), chromedp.WaitVisible(css("#login")))
	if text := value(t, b, chromedp.Text(css("main"))); strings.Contains(text, "Make COPY slower") || !strings.Contains(text, "private") {
		t.Errorf("the private finding without a session shows\n%s", text)
	}
	b.forget() // the 401
	b.do(t, chromedp.SendKeys(css(`#login input[name="token"]`), token), chromedp.Submit(css("#login")),
		chromedp.WaitVisible(css("#report")))
	if text := value(t, b, chromedp.Text(css("#report"))); !strings.Contains(text, "Make COPY slower") {
		t.Errorf("after signing in, the finding shows\n%s", text)
	}
	b.noErrors(t, "sign-in")

	// The request form, submitted as a person would.
	b.do(t, chromedp.Navigate(ts.URL+"/request"), chromedp.WaitVisible(css("#compare-form")),
		chromedp.SendKeys(css(`#compare-form input[name="scenario"]`), "copy-single"),
		chromedp.SendKeys(css(`#compare-form input[name="a"]`), "REL_16_0"),
		chromedp.SendKeys(css(`#compare-form input[name="b"]`), "REL_17_0"),
		chromedp.SendKeys(css(`#compare-form input[name="min_effect"]`), "5%"))
	b.screenshot(t, "request-form")
	b.do(t, chromedp.Submit(css("#compare-form")), chromedp.WaitVisible(css("#queued")))
	js := queued()
	if len(js) != 1 || js[0].Kind != "compare" || !strings.Contains(string(js[0].Args), `"b": "REL_17_0"`) {
		t.Fatalf("after submitting the form the queue holds %+v", js)
	}
	row := value(t, b, chromedp.Text(css("#queue table")))
	if !strings.Contains(row, fmt.Sprint(js[0].ID)) || !strings.Contains(row, "REL_17_0") {
		t.Errorf("the queue does not show job %d:\n%s", js[0].ID, row)
	}
	b.screenshot(t, "request-queued")
	b.noErrors(t, "request form")

	// Another site's form posting to the dashboard (with this browser's
	// session) is refused, and queues nothing.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>evil</title><form id="evil" method="post" action="%s/request">
<input type="hidden" name="kind" value="compare"><input type="hidden" name="scenario" value="copy-single">
<input type="hidden" name="a" value="x"><input type="hidden" name="b" value="evil-b"></form>`, ts.URL)
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another site
	b.do(t, chromedp.Navigate(evilURL), chromedp.WaitReady(css("#evil")), chromedp.Submit(css("#evil")),
		chromedp.WaitReady(css("body")))
	text := value(t, b, chromedp.Poll[string](`(() => { const t = document.body ? document.body.textContent : "";
		return location.pathname === "/request" && t ? t : null; })()`))
	if !strings.Contains(text, "cross-origin request detected") {
		t.Errorf("the cross-site form got %q", text)
	}
	// A POST from the dashboard's own page without credentials gets 401.
	b.do(t, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(css("#queue")))
	code := value(t, b, chromedp.Evaluate[int](`fetch("/api/requests", {method: "POST", credentials: "omit",
		body: JSON.stringify({kind: "compare", scenario: "copy-single", a: "x", b: "unauthenticated"})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if code != http.StatusUnauthorized {
		t.Errorf("a POST without credentials got %d, want 401", code)
	}
	if js := queued(); len(js) != 1 {
		t.Errorf("the refused requests queued jobs: %+v", js)
	}
	if _, err := queue.q.Cancel(context.Background(), js[0].ID); err != nil {
		t.Fatal(err)
	}
}
