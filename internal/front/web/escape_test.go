package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/store"
)

// TestHostileTextEscaped stores a nightly series whose scenario, metric,
// point, branch and machine are markup, and fetches the pages that show
// them: every page carries the text escaped, never as markup.
func TestHostileTextEscaped(t *testing.T) {
	ts, st := newTestServer(t)
	ctx := context.Background()
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	env, err := st.Environment(ctx, json.RawMessage(fmt.Sprintf(`{"host": %q, "cpu": %q, "cores": 2}`, "host"+evil, "cpu"+evil)))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Date(2026, 2, 1, 2, 0, 0, 0, time.UTC)
	commit := hash(uint32(time.Now().UnixNano()&0xffffff), 99)
	n := store.NightlyRun{Branch: "branch" + evil, Commit: commit, Status: "ok", Started: started, Finished: started.Add(time.Hour)}
	if err := st.RecordNightly(ctx, &n); err != nil {
		t.Fatal(err)
	}
	key := "key-" + commit
	if err := st.RecordBuild(ctx, store.Build{Key: key, Commit: commit, Status: "ok", Duration: time.Minute, Time: started}); err != nil {
		t.Fatal(err)
	}
	sample := store.Sample{BuildKey: key, Commit: commit, Scenario: "scenario" + evil, Point: "p=" + evil, Metric: "metric" + evil,
		Value: 1, Time: started, EnvironmentID: env, NightlyID: n.ID}
	if err := st.AddSamples(ctx, []store.Sample{sample}); err != nil {
		t.Fatal(err)
	}
	series := "/series?" + url.Values{"scenario": {sample.Scenario}, "metric": {sample.Metric}, "point": {sample.Point}}.Encode()
	for _, path := range []string{"/", "/series", series, "/commits/" + commit, "/nights/" + itoa(n.ID)} {
		code, body, _ := get(t, ts, path)
		if code != 200 {
			t.Errorf("GET %s: %d", path, code)
			continue
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("GET %s: the stored markup is in the page unescaped:\n%s", path, body)
		}
		if !strings.Contains(body, "&lt;script&gt;") && !strings.Contains(body, `\u003cscript\u003e`) {
			t.Errorf("GET %s: the stored text is not shown escaped", path)
		}
	}
}
