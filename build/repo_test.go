package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// history is a small repository with a merge and doc-only commits:
//
//	c1 - c2 - c3(doc) - c4 - m1 - c5(doc) - c6(doc)   master
//	       \                /
//	        f1 ------- f2                             feature
type history struct {
	*testRepo
	c1, c2, c3, c4, f1, f2, m1, c5, c6 string
}

func newHistory(t *testing.T) *history {
	r := newTestRepo(t)
	h := &history{testRepo: r}
	files := map[string]string{
		"README":                "readme\n",
		"configure":             "#!/bin/sh\n",
		"src/a.c":               "int a;\n",
		"src/old.c":             "int old;\n",
		"doc/src/sgml/ref.sgml": "<doc/>\n",
	}
	h.c1 = r.commit("root", nil, files)
	files = with(files, "src/a.c", "int a = 2;\n")
	h.c2 = r.commit("change a.c", []string{h.c1}, files)
	feature := with(files, "src/b.c", "int b;\n")
	h.f1 = r.commit("feature: add b.c", []string{h.c2}, feature)
	files = with(files, "doc/src/sgml/ref.sgml", "<doc>more</doc>\n")
	h.c3 = r.commit("docs only", []string{h.c2}, files)
	feature = with(feature, "src/c.c", "int c;\n")
	h.f2 = r.commit("feature: add c.c", []string{h.f1}, feature)
	files = with(files, "src/a.c", "int a = 4;\n", "src/old.c", "")
	h.c4 = r.commit("change a.c again, remove old.c", []string{h.c3}, files)
	files = with(files, "src/b.c", "int b;\n", "src/c.c", "int c;\n")
	h.m1 = r.commit("merge feature", []string{h.c4, h.f2}, files)
	files = with(files, "doc/src/sgml/intro.sgml", "<intro/>\n", "src/test/regress/expected/x.out", "x\n")
	h.c5 = r.commit("docs and expected output", []string{h.m1}, files)
	files = with(files, "src/backend/po/de.po", "msgid\n", "src/backend/README", "r\n")
	h.c6 = r.commit("translations and readme", []string{h.c5}, files)
	r.ref("refs/heads/master", h.c6)
	r.ref("refs/heads/feature", h.f2)
	r.ref("refs/remotes/origin/master", h.c4)
	r.ref("refs/tags/v1", h.c2)
	// An annotated tag of c4.
	tag := &object.Tag{Name: "v2", Tagger: object.Signature{Name: "T", Email: "t@example.org", When: r.base}, Message: "v2\n",
		TargetType: plumbing.CommitObject, Target: plumbing.NewHash(h.c4)}
	obj := r.git.Storer.NewEncodedObject()
	if err := tag.Encode(obj); err != nil {
		t.Fatal(err)
	}
	th, err := r.git.Storer.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	r.ref("refs/tags/v2", th.String())
	return h
}

func (h *history) name(hash string) string {
	for name, v := range map[string]string{"c1": h.c1, "c2": h.c2, "c3": h.c3, "c4": h.c4, "f1": h.f1, "f2": h.f2, "m1": h.m1, "c5": h.c5, "c6": h.c6} {
		if v == hash {
			return name
		}
	}
	return Short(hash)
}

func TestResolve(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	tests := []struct {
		rev  string
		want string
	}{
		{h.c2, h.c2},
		{strings.ToUpper(h.c2), h.c2},
		{h.c2[:7], h.c2},
		{h.c2[:9], h.c2}, // odd length
		{"v1", h.c2},
		{"v2", h.c4}, // annotated tag
		{"refs/tags/v2", h.c4},
		{"master", h.c6},
		{"HEAD", h.c6},
		{"feature", h.f2},
		{"origin/master", h.c4},
		{"master~1", h.c5},
		{"master~3", h.c4},
		{"master^^", h.m1},
		{"master~2^2", h.f2},
		{"master~2^2~1", h.f1},
		{"master~2^1", h.c4},
		{"master^0", h.c6},
		{"v1~", h.c1},
	}
	for _, tt := range tests {
		c, err := repo.Resolve(tt.rev)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tt.rev, err)
			continue
		}
		if c.Hash != tt.want {
			t.Errorf("Resolve(%q) = %s, want %s", tt.rev, h.name(c.Hash), h.name(tt.want))
		}
	}
	c, err := repo.Resolve("v1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "change a.c" || c.Author != "Test Author" || c.AuthorEmail != "author@example.org" ||
		!reflect.DeepEqual(c.Parents, []string{h.c1}) || c.Short() != h.c2[:10] || c.Date.IsZero() {
		t.Errorf("Resolve(v1) = %+v", c)
	}

	for _, tt := range []struct{ rev, wantErr string }{
		{"nosuch", `unknown revision "nosuch"`},
		{"", "empty revision"},
		{"master~100", "has no parent"},
		{"master^3", "has 1 parent(s), not 3"},
		{"abc", "at least 4 hex digits"},
		{strings.Repeat("0", 40), "no such commit"},
		{"deadbeefdead", "no commit hash starts with it"},
	} {
		_, err := repo.Resolve(tt.rev)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Resolve(%q) error = %v, want it to contain %q", tt.rev, err, tt.wantErr)
		}
	}
}

func TestResolveAmbiguousShortHash(t *testing.T) {
	r := newTestRepo(t)
	tree := r.tree(map[string]string{"f": "x\n"})
	// Find two commit messages whose commits share a 4-digit prefix.
	seen := map[string]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		msg := fmt.Sprintf("commit %d", i)
		sig := object.Signature{Name: "Test Author", Email: "author@example.org", When: r.base}
		obj := r.git.Storer.NewEncodedObject()
		if err := (&object.Commit{Author: sig, Committer: sig, Message: msg + "\n", TreeHash: tree}).Encode(obj); err != nil {
			t.Fatal(err)
		}
		p := obj.Hash().String()[:4]
		if other, ok := seen[p]; ok {
			a, b = other, msg
		}
		seen[p] = msg
	}
	ha := r.store(a, tree, nil, r.base)
	hb := r.store(b, tree, nil, r.base)
	if ha[:4] != hb[:4] {
		t.Fatalf("setup: %s and %s do not share a prefix", ha, hb)
	}
	repo := r.open()
	_, err := repo.Resolve(ha[:4])
	if err == nil {
		t.Fatalf("Resolve(%s) succeeded, want an ambiguity error", ha[:4])
	}
	for _, want := range []string{"ambiguous", Short(ha), Short(hb), a, b} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// Enough digits resolve.
	n := 5
	for ha[:n] == hb[:n] {
		n++
	}
	if c, err := repo.Resolve(ha[:n]); err != nil || c.Hash != ha {
		t.Errorf("Resolve(%s) = %v, %v; want %s", ha[:n], c.Hash, err, ha)
	}
}

func TestRange(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	tests := []struct {
		good, bad   string
		firstParent bool
		want        []string
	}{
		{h.c2, h.c6, false, []string{h.f1, h.c3, h.f2, h.c4, h.m1, h.c5, h.c6}},
		{h.c2, h.c6, true, []string{h.c3, h.c4, h.m1, h.c5, h.c6}},
		{h.f2, h.c6, false, []string{h.c3, h.c4, h.m1, h.c5, h.c6}},
		{h.c4, h.m1, false, []string{h.f1, h.f2, h.m1}},
		{h.c4, h.m1, true, []string{h.m1}},
		{h.c1, h.c2, false, []string{h.c2}},
		{h.c6, h.c2, false, nil},
		{h.c6, h.c6, false, nil},
		{h.c3, h.f2, false, []string{h.f1, h.f2}}, // good is not an ancestor of bad
	}
	for _, tt := range tests {
		got, err := repo.Range(tt.good, tt.bad, tt.firstParent)
		if err != nil {
			t.Errorf("Range(%s, %s, %v): %v", h.name(tt.good), h.name(tt.bad), tt.firstParent, err)
			continue
		}
		var names, want []string
		for _, c := range got {
			names = append(names, h.name(c.Hash))
		}
		for _, c := range tt.want {
			want = append(want, h.name(c))
		}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("Range(%s, %s, %v) = %v, want %v", h.name(tt.good), h.name(tt.bad), tt.firstParent, names, want)
		}
	}
	if _, err := repo.Range("nosuch", h.c6, false); err == nil || !strings.Contains(err.Error(), "good revision") {
		t.Errorf("Range with unknown good: %v", err)
	}
}

// TestRangeClockSkew checks that a commit on the good side whose committer
// date is far in the future (a wrong clock) does not leak into the range.
func TestRangeClockSkew(t *testing.T) {
	r := newTestRepo(t)
	files := map[string]string{"f": "1\n"}
	a := r.commit("a", nil, files)
	b := r.commit("b", []string{a}, with(files, "f", "2\n"))
	// side is merged into good but its date is a week ahead of everything.
	side := r.store("side", r.tree(with(files, "g", "1\n")), []string{a}, r.base.AddDate(0, 0, 7))
	good := r.commit("good", []string{b, side}, with(files, "f", "2\n", "g", "1\n"))
	c := r.commit("c", []string{good}, with(files, "f", "3\n", "g", "1\n"))
	bad := r.commit("bad", []string{c}, with(files, "f", "4\n", "g", "1\n"))
	repo := r.open()
	got, err := repo.Range(good, bad, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Hash != c || got[1].Hash != bad {
		var s []string
		for _, x := range got {
			s = append(s, x.Subject)
		}
		t.Errorf("Range(good, bad) = %v, want [c bad]", s)
	}
	for _, tt := range []struct {
		a, b string
		want bool
	}{{side, bad, true}, {a, bad, true}, {bad, side, false}, {side, b, false}} {
		if got, err := repo.IsAncestor(tt.a, tt.b); err != nil || got != tt.want {
			t.Errorf("IsAncestor(%s, %s) = %v, %v; want %v", Short(tt.a), Short(tt.b), got, err, tt.want)
		}
	}
}

func TestIsAncestor(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	tests := []struct {
		a, b string
		want bool
	}{
		{h.c1, h.c6, true},
		{h.f1, h.m1, true},
		{h.f1, h.c4, false},
		{h.c4, h.f2, false},
		{h.c3, h.c3, true},
		{h.c6, h.c1, false},
		{"v1", "master", true},
	}
	for _, tt := range tests {
		got, err := repo.IsAncestor(tt.a, tt.b)
		if err != nil {
			t.Errorf("IsAncestor(%s, %s): %v", h.name(tt.a), h.name(tt.b), err)
			continue
		}
		if got != tt.want {
			t.Errorf("IsAncestor(%s, %s) = %v, want %v", h.name(tt.a), h.name(tt.b), got, tt.want)
		}
	}
	if _, err := repo.IsAncestor("nosuch", h.c1); err == nil {
		t.Error("IsAncestor with an unknown revision succeeded")
	}
}

func TestMergeBase(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	for _, tt := range []struct{ a, b, want string }{
		{h.f2, h.c4, h.c2},      // diverging branches: their fork point
		{"feature", h.c3, h.c2}, // by name
		{h.c1, h.c6, h.c1},      // an ancestor is its own merge base
		{h.f1, h.c6, h.f1},      // merged in
	} {
		got, err := repo.MergeBase(tt.a, tt.b)
		if err != nil || got.Hash != tt.want {
			t.Errorf("MergeBase(%s, %s) = %s, %v; want %s", h.name(tt.a), h.name(tt.b), h.name(got.Hash), err, h.name(tt.want))
		}
	}
	if _, err := repo.MergeBase("nosuch", h.c1); err == nil {
		t.Error("MergeBase with an unknown revision succeeded")
	}
}

func TestChangedPaths(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	tests := []struct {
		rev  string
		want []string
	}{
		{h.c1, []string{"README", "configure", "doc/src/sgml/ref.sgml", "src/a.c", "src/old.c"}},
		{h.c2, []string{"src/a.c"}},
		{h.c4, []string{"src/a.c", "src/old.c"}},
		{h.m1, []string{"src/b.c", "src/c.c"}}, // against the first parent
		{h.c6, []string{"src/backend/README", "src/backend/po/de.po"}},
	}
	for _, tt := range tests {
		got, err := repo.ChangedPaths(tt.rev)
		if err != nil {
			t.Errorf("ChangedPaths(%s): %v", h.name(tt.rev), err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ChangedPaths(%s) = %v, want %v", h.name(tt.rev), got, tt.want)
		}
	}
}

func TestKeyDocOnly(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	b := NewBuilder(repo, t.TempDir(), Options{}, nil, nil)
	opt := Options{}.Hash()
	tests := []struct {
		rev    string
		source string
	}{
		{h.c1, h.c1},
		{h.c2, h.c2},
		{h.c3, h.c2}, // docs only
		{h.c4, h.c4},
		{h.m1, h.m1},
		{h.c5, h.m1}, // docs and expected output
		{h.c6, h.m1}, // translations and README on top of a doc-only commit
		{"master", h.m1},
	}
	for _, tt := range tests {
		k, err := b.Key(context.Background(), tt.rev)
		if err != nil {
			t.Errorf("Key(%s): %v", h.name(tt.rev), err)
			continue
		}
		full, _ := repo.Resolve(tt.rev)
		want := Key{ID: tt.source + "-" + opt, Source: tt.source, SameAsParent: tt.source != full.Hash}
		if k != want {
			t.Errorf("Key(%s) = {%s %s %v}, want source %s", h.name(tt.rev), k.ID, h.name(k.Source), k.SameAsParent, h.name(tt.source))
		}
	}
	// With no NoCompile patterns every commit is built.
	b2 := NewBuilder(repo, t.TempDir(), Options{NoCompile: []string{}}, nil, nil)
	if k, err := b2.Key(context.Background(), h.c6); err != nil || k.Source != h.c6 || k.SameAsParent {
		t.Errorf("Key(c6) without NoCompile = %+v, %v", k, err)
	}
	// Options that change the binaries change the key; Jobs does not.
	b3 := NewBuilder(repo, t.TempDir(), Options{CFLAGS: "-O0"}, nil, nil)
	k3, _ := b3.Key(context.Background(), h.c2)
	b4 := NewBuilder(repo, t.TempDir(), Options{Jobs: 7}, nil, nil)
	k4, _ := b4.Key(context.Background(), h.c2)
	if k3.ID == h.c2+"-"+opt || k4.ID != h.c2+"-"+opt {
		t.Errorf("keys: CFLAGS=-O0 %s, Jobs=7 %s, default %s", k3.ID, k4.ID, h.c2+"-"+opt)
	}
}

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"doc/**", "doc/src/sgml/ref.sgml", true},
		{"doc/**", "docs/x", false},
		{"**/po/**", "src/backend/po/de.po", true},
		{"**/po/**", "po/de.po", true},
		{"**/README", "README", true},
		{"**/README", "src/backend/README", true},
		{"**/README", "src/backend/README.c", false},
		{"**/t/*.pl", "src/bin/psql/t/001_basic.pl", true},
		{"**/t/*.pl", "src/bin/psql/t/lib/x.pm", false},
		{"src/test/regress/expected/**", "src/test/regress/expected/int4.out", true},
		{"src/test/regress/expected/**", "src/test/regress/regress.c", false},
		{"contrib/**/sql/**", "contrib/pg_trgm/sql/x.sql", true},
	}
	for _, tt := range tests {
		if got := MatchPath(tt.pattern, tt.path); got != tt.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
	for _, p := range []string{"src/backend/commands/copyfrom.c", "configure", "src/include/pg_config.h.in", "src/backend/parser/gram.y"} {
		if !compiled(p, DefaultNoCompile) {
			t.Errorf("%s counts as not compiled by default", p)
		}
	}
}

func TestCloneAndFetch(t *testing.T) {
	h := newHistory(t)
	state := t.TempDir()
	url := "file://" + h.dir
	repo, err := Open(context.Background(), url, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(repo.Dir(), state+"/repos/") || repo.Remote() != url {
		t.Errorf("clone in %s, remote %q", repo.Dir(), repo.Remote())
	}
	if c, err := repo.Resolve("master"); err != nil || c.Hash != h.c6 {
		t.Fatalf("Resolve(master) in the clone = %v, %v", c.Hash, err)
	}
	// A new upstream commit appears after Fetch, not before.
	files := map[string]string{"src/a.c": "int a = 7;\n"}
	c7 := h.commit("upstream change", []string{h.c6}, files)
	h.ref("refs/heads/master", c7)
	again, err := Open(context.Background(), url, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Dir() != repo.Dir() {
		t.Errorf("second Open used %s, want the existing clone %s", again.Dir(), repo.Dir())
	}
	if c, _ := again.Resolve("master"); c.Hash != h.c6 {
		t.Errorf("master before Fetch = %s, want c6", h.name(c.Hash))
	}
	if err := again.Fetch(context.Background(), "master"); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []string{"master", "origin/master"} {
		if c, err := again.Resolve(rev); err != nil || c.Hash != c7 {
			t.Errorf("%s after Fetch = %v, %v; want the new commit", rev, h.name(c.Hash), err)
		}
	}
	if _, err := Open(context.Background(), t.TempDir()+"/missing", state, nil); err == nil {
		t.Error("Open of a missing directory succeeded")
	}
}

// TestRangeShallow lists and compares commits of a shallow clone, as
// ../shared/pg-history's are (upstream's hashes, shallow at the cycle's
// first commit): the walk stops at the boundary commit, whose parent is
// not in the repository, instead of failing on it. The boundary itself
// may be the good end of a range (the README's whole-cycle command).
func TestRangeShallow(t *testing.T) {
	r := newTestRepo(t)
	files := map[string]string{"f": "1\n"}
	a := r.commit("a", nil, files)
	b := r.commit("b", []string{a}, with(files, "f", "2\n"))
	c := r.commit("c", []string{b}, with(files, "f", "3\n"))
	d := r.commit("d", []string{c}, with(files, "f", "4\n"))
	// a is gone, and b is the boundary: a shallow clone at b.
	if err := os.Remove(filepath.Join(r.dir, "objects", a[:2], a[2:])); err != nil {
		t.Fatal(err)
	}
	repo := r.open()
	if _, err := repo.Range(b, d, false); err == nil {
		t.Fatal("Range over a missing parent without a shallow file succeeded: the test does not stage the gap")
	}
	if err := r.git.Storer.SetShallow([]plumbing.Hash{plumbing.NewHash(b)}); err != nil {
		t.Fatal(err)
	}
	repo = r.open()
	for _, fp := range []bool{false, true} {
		got, err := repo.Range(b, d, fp)
		if err != nil {
			t.Fatalf("Range(b, d, %v) in a shallow clone: %v", fp, err)
		}
		if len(got) != 2 || got[0].Hash != c || got[1].Hash != d {
			t.Errorf("Range(b, d, %v) = %v, want [c d]", fp, got)
		}
	}
	// The boundary reads as a root commit: no parents, every path
	// changed (a build key of its own, built in full).
	if bc, err := repo.Resolve(b); err != nil || len(bc.Parents) != 0 {
		t.Errorf("the boundary commit: %+v, %v; want it without parents", bc, err)
	}
	if paths, err := repo.ChangedPaths(b); err != nil || len(paths) != 1 || paths[0] != "f" {
		t.Errorf("ChangedPaths of the boundary = %v, %v; want every path", paths, err)
	}
	got, err := repo.Range(c, d, false)
	if err != nil || len(got) != 1 || got[0].Hash != d {
		t.Errorf("Range(c, d) = %v, %v; want [d]", got, err)
	}
	for _, tt := range []struct {
		a, b string
		want bool
	}{{b, d, true}, {d, b, false}, {c, d, true}} {
		if got, err := repo.IsAncestor(tt.a, tt.b); err != nil || got != tt.want {
			t.Errorf("IsAncestor(%s, %s) = %v, %v; want %v", Short(tt.a), Short(tt.b), got, err, tt.want)
		}
	}
}
