package build

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMakeDirs(t *testing.T) {
	tree := func(dirs ...string) string {
		src := t.TempDir()
		for _, d := range dirs {
			p := filepath.Join(src, filepath.FromSlash(d))
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "Makefile"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return src
	}
	common := []string{"src/port", "src/common", "src/timezone", "src/backend", "src/backend/utils/mb/conversion_procs",
		"src/backend/snowball", "src/interfaces/libpq", "src/backend/replication/libpqwalreceiver",
		"src/backend/replication/pgoutput", "src/fe_utils", "src/pl", "src/bin/initdb", "src/bin/pg_ctl", "src/bin/psql"}
	others := []string{"src/bin/pg_dump", "src/interfaces/ecpg", "contrib/pg_stat_statements", "contrib/amcheck"}
	v16 := tree(append(append(slices.Clone(common), "src/bin/pgbench"), others...)...)
	v96 := tree(append(append(slices.Clone(common), "contrib/pgbench"), others...)...)

	for _, tc := range []struct {
		name string
		src  string
		o    Options
		want []string
		err  string
	}{
		{"16", v16, Options{}, append(slices.Clone(common), "src/bin/pgbench"), ""},
		{"9.6 has pgbench in contrib", v96, Options{}, append(slices.Clone(common), "contrib/pgbench"), ""},
		{"contrib asked for", v16, Options{Contrib: []string{"pg_stat_statements"}}, append(slices.Clone(common), "src/bin/pgbench", "contrib/pg_stat_statements"), ""},
		{"all", v16, Options{All: true}, nil, ""},
		{"all and contrib", v16, Options{All: true, Contrib: []string{"amcheck"}}, []string{"contrib/amcheck"}, ""},
		{"missing module", v16, Options{Contrib: []string{"pg_walinspect"}}, nil, "build.contrib names contrib/pg_walinspect, which this tree does not have"},
		{"not a name", v16, Options{Contrib: []string{"../src"}}, nil, `"../src" is not a contrib module's name`},
	} {
		got, err := makeDirs(tc.src, tc.o)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: makeDirs = %q, %v\nwant %q", tc.name, got, err, tc.want)
		}
	}

	wt := &worktree{dir: "/s/worktrees/abc"}
	o := Options{Jobs: 2}
	cs := makeCommands(wt, o, []string{"src/backend", "src/bin/psql"})
	if len(cs) != 2 || cs[0].dir != "/s/worktrees/abc/build/src/backend" || cs[1].dir != "/s/worktrees/abc/build/src/bin/psql" {
		t.Errorf("makeCommands: %v", cs)
	}
	cs = installCommands(wt, Options{All: true}, "/d", []string{"contrib/amcheck"})
	if len(cs) != 2 || cs[0].dir != "/s/worktrees/abc/build" || cs[1].dir != "/s/worktrees/abc/build/contrib/amcheck" || !slices.Contains(cs[1].args, "install") {
		t.Errorf("installCommands with all: %v", cs)
	}
}

func TestMeasuredIgnores(t *testing.T) {
	for _, tc := range []struct {
		p       string
		o       Options
		ignored bool
	}{
		{"src/bin/pg_dump/pg_dump.c", Options{}, true},
		{"src/bin/pg_dump/pg_dump.c", Options{All: true}, false},
		{"src/bin/psql/describe.c", Options{}, false},
		{"src/bin/pgbench/pgbench.c", Options{}, false},
		{"src/bin/initdb/initdb.c", Options{}, false},
		{"src/bin/pg_ctl/pg_ctl.c", Options{}, false},
		{"src/interfaces/ecpg/preproc/ecpg.trailer", Options{}, true},
		{"src/interfaces/libpq/fe-exec.c", Options{}, false},
		{"src/test/regress/regress.c", Options{}, true},
		{"src/test/modules/test_slru/test_slru.c", Options{}, true},
		{"contrib/amcheck/verify_nbtree.c", Options{}, true},
		{"contrib/amcheck/verify_nbtree.c", Options{Contrib: []string{"amcheck"}}, false},
		{"contrib/pgbench/pgbench.c", Options{}, false},
		{"contrib/contrib-global.mk", Options{}, false},
		{"src/backend/commands/copyfromparse.c", Options{}, false},
		{"src/include/nodes/primnodes.h", Options{}, false},
		{"src/tools/gen_keywordlist.pl", Options{}, false},
		{"src/backend/meson.build", Options{All: true}, true},
		{"meson_options.txt", Options{}, true},
	} {
		if got := measuredIgnores(tc.p, tc.o); got != tc.ignored {
			t.Errorf("measuredIgnores(%s, all %v contrib %v) = %v, want %v", tc.p, tc.o.All, tc.o.Contrib, got, tc.ignored)
		}
	}
	// What is built is part of the key; meson builds build everything.
	if (Options{}).Hash() == (Options{All: true}).Hash() || (Options{}).Hash() == (Options{Contrib: []string{"amcheck"}}).Hash() {
		t.Error("All and Contrib do not change the options hash")
	}
	if (Options{Contrib: []string{"b", "a", "a"}}).Hash() != (Options{Contrib: []string{"a", "b"}}).Hash() {
		t.Error("the order or repetition of Contrib changes the options hash")
	}
	if (Options{Meson: true}).Hash() != (Options{Meson: true, All: true, Contrib: []string{"a"}}).Hash() {
		t.Error("All or Contrib change a meson build's hash")
	}
}
