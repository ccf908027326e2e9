package app

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []Request{
		BisectRequest{Scenario: "/s.yaml", Good: "A", Bad: "B", Metric: "copy_time", Set: map[string]string{"rows": "10"},
			MinEffect: 0.1, Exhaustive: true, Post: true, Requester: "me@host"},
		CompareRequest{Scenario: "/s.yaml", A: "A", B: "B", MaxTime: 3e9, OrderSeed: 7},
		RunRequest{Scenario: "/s.yaml", BinDir: "/usr/lib/postgresql/15/bin", Samples: 5},
		NightlyRequest{Force: true, Deliver: true},
		DeliverRequest{},
	} {
		kind, data, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		back, legacy, err := DecodeRequest(kind, data)
		if err != nil || legacy != nil || !reflect.DeepEqual(back, r) {
			t.Errorf("%s %s came back as %#v, %v", kind, data, back, err)
		}
	}
}

// TestKindsTable: each kind is in the table once, and every kind the
// daemon queues has its operation (RunJob refuses the others).
func TestKindsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range kinds {
		name := k.zero.Kind()
		if seen[name] || kindOf(name) != &kinds[len(seen)] {
			t.Errorf("kind %q is listed twice", name)
		}
		seen[name] = true
		if _, ok := k.zero.(runnable); ok != (k.job != nil) {
			t.Errorf("kind %q: queued %v, but has an operation for the daemon: %v", name, k.job != nil, ok)
		}
		if k.job != nil && k.job.Attempts < 1 {
			t.Errorf("kind %q is tried %d times", name, k.job.Attempts)
		}
	}
	if got := strings.Join(QueuedKinds(), ","); got != "bisect,compare,nightly,deliver" {
		t.Errorf("queued kinds %s", got)
	}
	err := (&App{}).RunJob(t.Context(), Job{}, RunRequest{}, nil)
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "a run request cannot be queued: the daemon runs bisect, compare, nightly, deliver") {
		t.Errorf("a run request as a job: %v", err)
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	_, legacy, err := DecodeRequest("bisect", json.RawMessage(`{"argv": ["--scenario", "/s.yaml", "--good", "A"], "requester": "me"}`))
	if !errors.Is(err, ErrLegacyJob) || legacy == nil || legacy.Requester != "me" || len(legacy.Argv) != 4 {
		t.Errorf("a command-line job: %+v, %v; want it as a LegacyJob", legacy, err)
	}
	for _, c := range []struct{ kind, args, want string }{
		{"bisect", `{"scenario": "/s.yaml", "goood": "A"}`, `unknown field "goood"`},
		{"frobnicate", `{}`, `unknown request kind "frobnicate"`},
		{"bisect", `[1]`, "a bisect request"},
	} {
		if _, _, err := DecodeRequest(c.kind, json.RawMessage(c.args)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want an error with %q", c.kind, c.args, err, c.want)
		}
	}
}

func TestBisectRequestArgs(t *testing.T) {
	r := BisectRequest{Scenario: "/s.yaml", Good: "A", Bad: "B", Metric: "m", FirstParent: true, Exhaustive: true, Set: map[string]string{"b": "2", "a": "1"}, MaxSamples: 30}
	want := "--scenario /s.yaml --good A --bad B --metric m --first-parent --exhaustive --max-samples 30 --set a=1 --set b=2"
	if got := strings.Join(r.Args(), " "); got != want {
		t.Errorf("args %q, want %q", got, want)
	}
}

// TestLegacyJobRequest: a job an older pgbisect queued as the command line
// of 'pgbisect bisect' is read as the request it was.
func TestLegacyJobRequest(t *testing.T) {
	l := &LegacyJob{Argv: []string{"--scenario", "/abs/copy-single.yaml", "--good", "A", "--bad", "B",
		"--metric", "copy_time", "--set", "rows=10", "--post", "--repo", "/old/repo", "--reuse-samples"}, Requester: "me@host"}
	r, err := l.Request()
	if err != nil {
		t.Fatal(err)
	}
	want := BisectRequest{Scenario: "/abs/copy-single.yaml", Good: "A", Bad: "B", Metric: "copy_time", Set: map[string]string{"rows": "10"},
		Post: true, ReuseSamples: true, Requester: "me@host"}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("legacy job read as %+v, want %+v", r, want)
	}
	l.Argv = []string{"--scenario", "/abs/s.yaml", "--frobnicate"}
	if _, err := l.Request(); err == nil || !strings.Contains(err.Error(), "queue it again") {
		t.Errorf("unparseable legacy job: %v", err)
	}
}
