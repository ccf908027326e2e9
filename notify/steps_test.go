package notify

import (
	"strings"
	"testing"
)

// TestWorkloadStepsShown: a bisection that left trailing workload steps
// out says which steps ran and which did not, in both report forms; one
// that ran them all says which ran.
func TestWorkloadStepsShown(t *testing.T) {
	f := twoCulprits()
	f.Steps, f.StepsSkipped = []string{"truncate", "copy"}, []string{"parse"}
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	md, txt := flat(Markdown(f, Options{})), flat(Text(f, Options{}))
	if !strings.Contains(md, "Each sample ran the workload steps `truncate`, `copy`; not run: `parse`, which feed no metric") {
		t.Errorf("markdown report without the steps:\n%s", md)
	}
	if !strings.Contains(txt, "Each sample ran the workload steps truncate, copy; not run: parse, which feed no metric") {
		t.Errorf("text report without the steps:\n%s", txt)
	}
	f.StepsSkipped = nil
	if txt := flat(Text(f, Options{})); !strings.Contains(txt, "Each sample ran the workload steps truncate, copy. ") {
		t.Errorf("text report of a bisection that ran every step:\n%s", txt)
	}
	if txt := Text(twoCulprits(), Options{}); strings.Contains(txt, "workload steps") {
		t.Error("a finding without steps mentions them")
	}
}
