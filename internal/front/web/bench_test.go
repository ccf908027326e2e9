package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// benchNights and benchMetrics size the benchmark series: a thousand
// nights of four metrics, five samples each.
const benchNights, benchMetrics = 1000, 4

// seedLarge stores benchNights nightly runs measuring benchMetrics metrics
// of one scenario and returns the scenario's name.
func seedLarge(tb testing.TB, st *store.Store) string {
	tb.Helper()
	ctx := context.Background()
	scenario := fmt.Sprintf("large-%d", time.Now().UnixNano())
	base := time.Date(2023, 1, 1, 2, 0, 0, 0, time.UTC)
	var ss []store.Sample
	for i := range benchNights {
		c := hash(uint32(i), i)
		n := store.NightlyRun{Branch: scenario, Commit: c, Status: "ok", Started: base.Add(time.Duration(i) * 24 * time.Hour)}
		if err := st.RecordNightly(ctx, &n); err != nil {
			tb.Fatal(err)
		}
		for m := range benchMetrics {
			for k := range 5 {
				ss = append(ss, store.Sample{BuildKey: "key-" + c, Commit: c, Scenario: scenario, Point: "clients=1",
					Metric: fmt.Sprintf("metric%d", m), Value: 100 + float64((i*13+k*7)%11) + float64(i/400)*8,
					Index: k, Time: n.Started, NightlyID: n.ID})
			}
		}
		if len(ss) >= 4000 {
			if err := st.AddSamples(ctx, ss); err != nil {
				tb.Fatal(err)
			}
			ss = ss[:0]
		}
	}
	if err := st.AddSamples(ctx, ss); err != nil {
		tb.Fatal(err)
	}
	return scenario
}

// BenchmarkSeriesPage renders the chart page of one metric of a 1,000-night
// series on the server, store reads included.
func BenchmarkSeriesPage(b *testing.B) {
	st := storetest.Store(b)
	srv, err := New(st, Config{})
	if err != nil {
		b.Fatal(err)
	}
	scenario := seedLarge(b, st)
	path := "/series?" + url.Values{"scenario": {scenario}, "metric": {"metric0"}, "point": {"clients=1"}}.Encode()
	for b.Loop() {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != http.StatusOK {
			b.Fatalf("%d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkSeriesPageBrowser measures, in headless Chromium, the time from
// navigating to the chart page of a 1,000-night series until the chart is
// drawn.
func BenchmarkSeriesPageBrowser(b *testing.B) {
	st := storetest.Store(b)
	srv, err := New(st, Config{})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	scenario := seedLarge(b, st)
	path := ts.URL + "/series?" + url.Values{"scenario": {scenario}, "metric": {"metric0"}, "point": {"clients=1"}}.Encode()
	br := newBrowserB(b)
	for b.Loop() {
		if err := chromedp.Do(br, chromedp.Navigate("about:blank"), chromedp.Navigate(path),
			chromedp.WaitVisible(chromedp.CSS("#chart canvas"))); err != nil {
			b.Fatal(err)
		}
	}
}

// newBrowserB starts headless Chromium for a benchmark.
func newBrowserB(b *testing.B) context.Context {
	b.Helper()
	path := chromium(b)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.UserDataDir(b.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	b.Cleanup(func() { cancelC(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		b.Fatal(err)
	}
	return ctx
}
