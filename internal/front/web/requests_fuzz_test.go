package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
)

// FuzzDecodeRequest feeds the body decoder of POST /api/requests, behind
// the same byte limit as the handler. Whatever the body: no panic, the
// time bounded, and either a FieldError naming a real field (or none) in
// a short message, or a request that passed its checks, whose every key
// names a field (the decoder is strict), and that reads back the same
// from its own JSON.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		// docs/dashboard.md's curl examples and the API tests' bodies.
		`{"kind": "bisect", "scenario": "copy-single", "good": "REL_15_0", "bad": "REL_16_0", "metric": "copy_time"}`,
		`{"kind": "compare", "scenario": "copy-single", "a": "REL_16_0", "b": "REL_17_0", "point": "clients=1", "min_effect": 0.05, "max_samples": 40}`,
		`{"kind": "bisect", "goood": "x"}`,
		`{"kind": "bisect", "good": 15}`,
		`{"kind": "compare", "scenario": "s", "a": "x", "b": "y", "metric": "tps"}`,
		`{"kind": "compare", "scenario": "s", "a": "x", "b": "y", "max_samples": -1}`,
		`{"kind": "bisect", "scenario": "s", "good": "a", "bad": "b"} {"kind": "bisect"}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	fields := strings.Split(requestFields, ", ")
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		var req Request
		var err error
		fuzztest.Within(t, func() {
			r := httptest.NewRequest("POST", "/api/requests", bytes.NewReader(body))
			req, err = decodeRequest(http.MaxBytesReader(w, r.Body, maxRequestBody))
		})
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%T %v, want a *FieldError", err, err)
			}
			if fe.Field != "" && !slices.Contains(fields, fe.Field) {
				t.Errorf("the error names field %q, which a request does not have: %v", fe.Field, err)
			}
			fuzztest.ShortError(t, err, 0)
			return
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(body, &keys); err != nil {
			// The first value was a request and nothing followed it:
			// json.Unmarshal and the decoder must agree on that.
			t.Fatalf("accepted %q, which is not one JSON object: %v", body, err)
		}
		for k := range keys {
			if !slices.ContainsFunc(fields, func(f string) bool { return strings.EqualFold(f, k) }) {
				t.Errorf("accepted the unknown field %q", k)
			}
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeRequest(bytes.NewReader(out))
		if err != nil || again != req {
			t.Errorf("%+v written as %s reads back as %+v (%v)", req, out, again, err)
		}
	})
}
