package notify

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test ./notify -run %s -update to create it): %v", t.Name(), err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file; run with -update if the change is intended.\n--- got ---\n%s", path, got)
	}
}

// TestGoldenReports renders every fixed finding in every format.
func TestGoldenReports(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			f := fx.f()
			if err := f.Validate(); err != nil {
				t.Fatal(err)
			}
			f.Plots = []string{"bisection.png", "bisection.svg"}
			golden(t, fx.name+".md", MarkdownFile(f))
			golden(t, fx.name+".txt", TextFile(f))
			js, err := Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, fx.name+".json", string(js))

			// The JSON form reads back to the same finding.
			back, err := Unmarshal(js)
			if err != nil {
				t.Fatal(err)
			}
			js2, err := Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if string(js2) != string(js) {
				t.Errorf("JSON does not survive a round trip")
			}
		})
	}
}
