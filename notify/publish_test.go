package notify

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// fileBox is an outbox that keeps files, as the results store does.
type fileBox struct {
	added []string
	files map[string]string
}

func (b *fileBox) Add(_ context.Context, f *finding.Finding) error {
	b.added = append(b.added, f.ID)
	return nil
}

func (b *fileBox) AddFile(_ context.Context, id, name string, data []byte) error {
	b.files[id+"/"+name] = string(data)
	return nil
}

// TestPublishKeepsFlameGraphs: an outbox that keeps files is given the
// flame graph a profiled culprit's report links, found next to the report;
// one missing from there is left out, not an error.
func TestPublishKeepsFlameGraphs(t *testing.T) {
	f := profiledCulprits()
	reports := t.TempDir()
	dir := filepath.Join(reports, f.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "flame-9f8377f7a2.svg"), []byte("<svg/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	box := &fileBox{files: map[string]string{}}
	if _, err := Publish(context.Background(), reports, f, box); err != nil {
		t.Fatal(err)
	}
	if len(box.added) != 1 || len(box.files) != 1 || box.files[f.ID+"/flame-9f8377f7a2.svg"] != "<svg/>" {
		t.Fatalf("published %v with files %v", box.added, box.files)
	}
	// Without the file (another machine's report directory): the finding
	// is published all the same.
	box = &fileBox{files: map[string]string{}}
	if _, err := Publish(context.Background(), t.TempDir(), f, box); err != nil || len(box.added) != 1 || len(box.files) != 0 {
		t.Fatalf("without the flame graph: %v, published %v with files %v", err, box.added, box.files)
	}
}
