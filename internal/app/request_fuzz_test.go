package app

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
)

// FuzzDecodeRequest feeds DecodeRequest, which reads every queued job's
// arguments (from the web, GitHub comments, 'pgbisect request', other
// machines' queues), with a kind and JSON. Whatever the input: no panic,
// the time bounded, an error quoting at most a short part of the kind, a legacy command line only for bisect
// and with its arguments; and a request that is of the kind asked, reads
// back the same from its own encoding, and is refused once an unknown
// field is added (the decoder is strict).
func FuzzDecodeRequest(f *testing.F) {
	runs, guided := 3, false
	for _, r := range []Request{
		BisectRequest{Scenario: "/etc/pgbisect/scenarios/copy-single.yaml", Good: "REL_15_0", Bad: "REL_16_0", Metric: "copy_time",
			Point: "clients=1;clients=4", Set: map[string]string{"rows": "1000"}, MinEffect: 0.02, MaxSamples: 40, MaxTime: 8 * 3600e9,
			ProfileRuns: &runs, ProfileGuided: &guided, Post: true, Requester: "github:andres"},
		CompareRequest{Scenario: "copy-single.yaml", A: "REL_16_0", PatchData: []PatchData{{Name: "pull-17.diff", Data: []byte("diff --git a/x b/x\n")}}, OrderSeed: 7},
		RunRequest{Scenario: "copy-single.yaml", Rev: "REL_16_0", Samples: 5},
		NightlyRequest{Force: true, Deliver: true},
		DeliverRequest{},
	} {
		kind, data, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kind, []byte(data))
	}
	f.Add("bisect", []byte(`{"argv": ["--scenario", "/s.yaml", "--good", "A"], "requester": "me"}`))
	f.Add("bisect", []byte(`{"scenario": "/s.yaml", "goood": "A"}`))
	f.Add("compare", []byte(`{"scenario": "s", "a": "x", "max_time": "1h"}`))
	f.Fuzz(func(t *testing.T, kind string, data []byte) {
		var r Request
		var legacy *LegacyJob
		var err error
		fuzztest.Within(t, func() { r, legacy, err = DecodeRequest(kind, data) })
		if errors.Is(err, ErrLegacyJob) {
			if kind != "bisect" || legacy == nil || r != nil {
				t.Errorf("a legacy job of kind %q: %+v %v", kind, legacy, r)
			}
			return
		}
		if err != nil {
			if r != nil || legacy != nil {
				t.Errorf("an error (%v) and a request", err)
			}
			// The kind is quoted clipped; a JSON error may quote a key
			// of the input whole.
			fuzztest.ShortError(t, err, len(data))
			return
		}
		if r.Kind() != kind {
			t.Fatalf("asked for a %q request, got a %q one", kind, r.Kind())
		}
		if reflect.ValueOf(r).Kind() == reflect.Pointer {
			t.Fatalf("a %T: requests are values", r)
		}
		k2, data2, err := Encode(r)
		if err != nil {
			// NaN and infinities do not decode from JSON, so this cannot
			// be them.
			t.Fatalf("%+v does not encode: %v", r, err)
		}
		// Encoded, decoded and encoded again: the same bytes (an empty
		// map or list reads back as none, which encodes the same).
		r2, _, err := DecodeRequest(k2, data2)
		if err != nil {
			t.Fatalf("%+v encoded as %s does not decode: %v", r, data2, err)
		}
		if _, data3, err := Encode(r2); err != nil || string(data3) != string(data2) {
			t.Errorf("%+v encoded as %s, decoded and encoded again: %s (%v)", r, data2, data3, err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data2, &fields); err != nil {
			t.Fatal(err)
		}
		fields["not_a_field"] = json.RawMessage("1")
		extra, _ := json.Marshal(fields)
		if _, _, err := DecodeRequest(kind, extra); err == nil {
			t.Errorf("a %s request with an unknown field was accepted: %s", kind, extra)
		}
	})
}

// FuzzCheck feeds Check, which every front door that queues a request for
// someone else calls, with a request decoded from a kind and JSON (what
// POST /api/requests takes). Whatever the input: no panic, the time
// bounded, and a request it accepts names nothing on the daemon's disk:
// its scenario a bare name, no client bin, patch file or flame graph
// path, and revisions and a resume ID free of control characters, paths'
// parts and anything longer than a revision is.
func FuzzCheck(f *testing.F) {
	sc := Scenarios{Dirs: []string{"../../configs/scenarios"}}
	for _, r := range []Request{
		BisectRequest{Scenario: "copy-single", Good: "REL_15_0", Bad: "REL_16_0", Set: map[string]string{"rows": "1000"}, MaxTime: 3600e9},
		BisectRequest{Resume: "20260130T021500Z-copy-single-9f8377f7a2", ClientBin: "/tmp/x"},
		BisectRequest{Resume: "b-42", MaxTime: 3600e9},
		BisectRequest{Scenario: "copy-single", Good: "tmp/evil/bin", Bad: "origin/REL_16_STABLE~2"},
		CompareRequest{Scenario: "copy-single.yaml", A: "REL_16_0", B: "master^2"},
		CompareRequest{Scenario: "copy-single", A: "REL_16_0", PatchData: []PatchData{{Name: "pull-17.diff", Data: []byte("diff --git a/x b/x\n")}}},
		CompareRequest{Scenario: "copy-single", A: "../bin", B: "HEAD:src", Patches: []string{"/etc/shadow"}},
	} {
		kind, data, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kind, []byte(data))
	}
	f.Fuzz(func(t *testing.T, kind string, data []byte) {
		r, _, err := DecodeRequest(kind, data)
		if err != nil {
			return
		}
		var got Request
		fuzztest.Within(t, func() { got, err = Check(r, sc) })
		if err != nil {
			if got != nil || !errors.Is(err, ErrBadRequest) {
				t.Errorf("%s %s: %v (a request %+v)", kind, data, err, got)
			}
			fuzztest.ShortError(t, err, len(data))
			return
		}
		switch x := got.(type) {
		case BisectRequest:
			if x.ClientBin != "" {
				t.Errorf("accepted client bin %q", x.ClientBin)
			}
			if x.Resume != "" {
				if strings.ContainsAny(x.Resume, "/\\:") || notRevision(x.Resume) != "" || x.Scenario+x.Good+x.Bad != "" {
					t.Errorf("accepted resume %+v", x)
				}
				return
			}
			checkName(t, x.Scenario)
			for _, rev := range []string{x.Good, x.Bad} {
				if why := notRevision(rev); why != "" {
					t.Errorf("accepted revision %q: %s", rev, why)
				}
			}
		case CompareRequest:
			if x.ClientBin != "" || len(x.Patches) > 0 || x.FlameGraph != "" {
				t.Errorf("accepted a path: %+v", x)
			}
			checkName(t, x.Scenario)
			for i, rev := range []string{x.A, x.B} {
				if i == 1 && rev == "" && len(x.PatchData) > 0 {
					continue
				}
				if why := notRevision(rev); why != "" {
					t.Errorf("accepted revision %q: %s", rev, why)
				}
			}
		default:
			t.Errorf("accepted a %s request", got.Kind())
		}
	})
}

// notRevision says why s, accepted as a revision, could be taken for a
// path or smuggle bytes: an independent restatement of checkRevision's
// promise, so that the fuzzer checks it rather than repeats it.
func notRevision(s string) string {
	switch {
	case s == "" || len(s) > 200:
		return "its length"
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r >= 0x7f }):
		return "a control, space or non-ASCII character"
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "~"):
		return "a path's or an option's start"
	case strings.Contains(s, "..") || strings.Contains(s, "//") || strings.Contains(s, "/.") || strings.ContainsAny(s, `\:`):
		return "a path's parts"
	case slices.Contains(strings.Split(s, "/"), "bin"):
		return "a bin directory"
	}
	return ""
}

// checkName fails t unless scenario is a bare name.
func checkName(t *testing.T, scenario string) {
	t.Helper()
	if scenario == "" || strings.ContainsAny(scenario, `/\`) || strings.HasPrefix(scenario, ".") || notRevision(scenario) != "" {
		t.Errorf("accepted scenario %q", scenario)
	}
}
