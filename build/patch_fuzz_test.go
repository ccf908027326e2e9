package build

import (
	"slices"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
)

// FuzzParsePatches feeds ParsePatches, the reader of 'compare --patch'
// and of the patches a GitHub comment names, with git diffs, format-patch
// messages and mboxes. Whatever the bytes: no panic, the time bounded, and
// either patches that each carry files and a name under the patch's own
// name, or an error that names the patch and quotes little of it. Reading
// the same bytes twice gives the same patches.
func FuzzParsePatches(f *testing.F) {
	for _, data := range fuzztest.Seeds(f, "testdata/patches/*") {
		f.Add(data)
	}
	f.Add([]byte("From x Mon\nSubject: 1\n\none\n\nFrom y Tue\nSubject: 2\n\ntwo\n"))
	f.Add([]byte("From: a@b\nContent-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/x-patch\nContent-Transfer-Encoding: quoted-printable\n\n" +
		"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a=3D\n+b\n--B--\n"))
	f.Add([]byte("diff --git a/new.c b/new.c\nnew file mode 100644\n--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+x\n"))
	f.Add([]byte("diff --git a/old.c b/renamed.c\nsimilarity index 100%\nrename from old.c\nrename to renamed.c\n"))
	const name = "fuzz.patch"
	f.Fuzz(func(t *testing.T, data []byte) {
		var ps []Patch
		var err error
		fuzztest.Within(t, func() { ps, err = ParsePatches(name, data) })
		if err != nil {
			if len(ps) != 0 {
				t.Errorf("an error (%v) and %d patches", err, len(ps))
			}
			if !strings.HasPrefix(err.Error(), "patch "+name) {
				t.Errorf("the error does not name the patch first: %v", err)
			}
			fuzztest.ShortError(t, err, len(name))
			return
		}
		if len(ps) == 0 {
			t.Fatal("no patches and no error")
		}
		for _, p := range ps {
			if len(p.Files) == 0 {
				t.Errorf("patch %q has no files", p.Name)
			}
			if !strings.HasPrefix(p.Name, name) {
				t.Errorf("patch named %q, not under %q", p.Name, name)
			}
		}
		again, err := ParsePatches(name, data)
		if err != nil {
			t.Fatalf("the second read failed: %v", err)
		}
		names := func(ps []Patch) (out []string) {
			for _, p := range ps {
				out = append(out, p.Name+"|"+p.Subject)
			}
			return out
		}
		if !slices.Equal(names(ps), names(again)) {
			t.Errorf("two reads of the same bytes: %q, then %q", names(ps), names(again))
		}
	})
}
