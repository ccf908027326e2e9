package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestStatusListsBisections: an unfinished bisection in the results store
// shows in status with what it is and how far it got, so its ID can be
// resumed.
func TestStatusListsBisections(t *testing.T) {
	st := storetest.Store(t)
	ctx := context.Background()
	commits := []bisect.Commit{
		{Hash: "6666666666666666666666666666666666666666", Subject: "good", Key: "k6"},
		{Hash: "7777777777777777777777777777777777777777", Subject: "bad", Key: "k7"},
	}
	in := bisect.Inputs{Repo: "/src/status-test", Good: commits[0].Hash, Bad: commits[1].Hash,
		Scenario: "/x/configs/scenarios/copy-single.yaml", Metric: "copy_time"}
	s, err := bisect.NewState(in, commits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.SamplesTaken = 7
	if err := st.SaveBisection(ctx, s); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	code, out, errs := postMain(t, "status", "--state", state)
	if code != 0 || !strings.Contains(out, "bisect --resume ID") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errs)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, s.ID) {
			line = l
		}
	}
	for _, want := range []string{"endpoints", "copy-single copy_time 6666666666..7777777777", " 7 "} {
		if !strings.Contains(line, want) {
			t.Errorf("the bisection's line %q lacks %q\n%s", line, want, out)
		}
	}
	code, out, _ = postMain(t, "status", "--state", state, "--json")
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v", code, err)
	}
	found := false
	for _, b := range rep.Bisections {
		found = found || (b.ID == s.ID && b.Samples == 7 && b.Phase == "endpoints")
	}
	if !found {
		t.Errorf("status --json lacks the bisection: %+v", rep.Bisections)
	}
}
