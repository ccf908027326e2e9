package soak

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// chromium returns the path of Debian's Chromium; without it the run
// fails under CI=true and is skipped elsewhere.
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

// checkDashboard opens the series page of the nightly metric in headless
// Chromium, as a user would: the culprit is listed; then it opens the
// killed bisection's page and leaves it, and reads serve's /metrics until
// no event stream is open. (The change-point table is not checked: with
// the regression on night 3 only two nights precede it, and the
// change-point detection does not flag a shift with two nights on one
// side at its p ≤ 0.001; docs/soak.md.)
func (l *lab) checkDashboard() []string {
	var p []string
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(l.t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(l.t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()

	base := "http://" + l.webAddr
	q := url.Values{"class": {class}, "scenario": {scenario}, "metric": {metric}}
	type css = chromedp.CSS
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/series?"+q.Encode()), chromedp.WaitVisible(css("#chart canvas"))); err != nil {
		return []string{fmt.Sprintf("the series page %s: %v", base+"/series?"+q.Encode(), err)}
	}
	culprits, err := chromedp.Run(ctx, chromedp.Text(css("#culprits")))
	if err != nil {
		return []string{fmt.Sprintf("the series page lists no culprit: %v", err)}
	}
	if !strings.Contains(culprits, l.culprit[:7]) {
		p = append(p, fmt.Sprintf("the series page's culprits do not name %s: %q", l.culprit[:10], culprits))
	}
	// A bisection's page follows its events while open; leaving it must
	// end the stream.
	if len(l.kills) > 0 {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/bisections/"+url.PathEscape(l.kills[0].bisection)),
			chromedp.Sleep(2*time.Second), chromedp.Navigate(base+"/series")); err != nil {
			p = append(p, fmt.Sprintf("the bisection page: %v", err))
		}
	}
	cancelC()
	var open string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		open = metricValue(base+"/metrics", "pgbisect_event_streams")
		if open == "0" || time.Now().After(deadline) {
			break
		}
	}
	if open != "0" {
		p = append(p, fmt.Sprintf("serve holds %s event streams open after the browser left", open))
	}
	return p
}

// metricValue reads one unlabelled metric from a Prometheus text page.
func metricValue(page, name string) string {
	resp, err := http.Get(page)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return "absent"
}
