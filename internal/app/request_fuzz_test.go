package app

import (
	"encoding/json"
	"errors"
	"reflect"
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
