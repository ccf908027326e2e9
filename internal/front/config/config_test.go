package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/notify"
)

func TestLoadErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"typo", "repo: /x\nbuild:\n  configur: [--enable-debug]\n", `pgbisect.yaml:3: unknown key "configur" (did you mean "configure"?)`},
		{"type", "build:\n  jobs: many\n", "pgbisect.yaml:2:"},
		{"range", "stats:\n  min_effect: 3\n", "stats.min_effect 3 is out of range"},
		{"tz", "nightly:\n  time_zone: Mars/Olympus\n", `nightly.time_zone "Mars/Olympus"`},
		{"contrib", "build:\n  contrib: [../../src/bin]\n", `build.contrib: "../../src/bin" is not a contrib module's name`},
		{"contrib key", "build:\n  contribs: [amcheck]\n", `unknown key "contribs" (did you mean "contrib"?)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.yaml), "pgbisect.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Setenv("PGBISECT_STATE", "/tmp/st")
	c, err := Load([]byte("branch: REL_16_STABLE\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Branch != "REL_16_STABLE" || c.StateDir != "/tmp/st" || c.RunAs != "pgbisect-bench" || c.Nightly.Schedule == "" {
		t.Fatalf("unexpected config %+v", c)
	}
}

// TestStoreUserDiffers: the results store and the benchmark servers must
// run as different OS users, so a scenario's steps cannot reach the store.
func TestStoreUserDiffers(t *testing.T) {
	c, err := Load([]byte("branch: master\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.DBRunAs != "pgbisect" || c.RunAs == c.DBRunAs {
		t.Errorf("defaults run_as %q, db_run_as %q: want postgres and pgbisect", c.RunAs, c.DBRunAs)
	}
	_, err = Load([]byte("run_as: bench\ndb_run_as: bench\n"), "c.yaml")
	if err == nil || !strings.Contains(err.Error(), "db_run_as and run_as are both \"bench\"") {
		t.Errorf("same user for both: %v, want an error naming them", err)
	}
}

func TestShippedConfigLoads(t *testing.T) {
	c, err := LoadFile("../../../configs/pgbisect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Branch != "master" || len(c.Nightly.Scenarios) != 1 {
		t.Fatalf("unexpected config %+v", c)
	}
}

// TestSectionsAreTheComponentsOwn checks that the build and github
// sections load straight into the builder's and the poster's own option
// types (no copy to keep in step), with the keys the components do not
// take from a file refused.
func TestSectionsAreTheComponentsOwn(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_configtest")
	c, err := Load([]byte("build:\n  configure: [--enable-debug]\n  cflags: -O0\n  meson: true\n  meson_options: [-Dssl=openssl]\n  jobs: 3\n  no_compile: ['doc/**']\n  timeout: 2h\n"+
		"github:\n  repo: o/n\n  api_url: https://ghe.example/api/v3/\n  labels: [bot]\n  report_url: https://r.example/\n  poll: 1m\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantBuild := build.Options{Configure: []string{"--enable-debug"}, CFLAGS: "-O0", Meson: true, MesonOptions: []string{"-Dssl=openssl"}, Jobs: 3, NoCompile: []string{"doc/**"}}
	if !reflect.DeepEqual(c.Build.Options, wantBuild) || c.Build.Timeout != 2*time.Hour {
		t.Errorf("build section: %+v, timeout %s; want %+v, 2h", c.Build.Options, c.Build.Timeout, wantBuild)
	}
	wantGitHub := notify.GitHubOptions{Repo: "o/n", APIURL: "https://ghe.example/api/v3/", Labels: []string{"bot"}, ReportURL: "https://r.example/", Token: "ghp_configtest"}
	if got := c.GitHub.Options(); !reflect.DeepEqual(got, wantGitHub) || c.GitHub.Poll != time.Minute {
		t.Errorf("github section: %+v, poll %s; want %+v, 1m", got, c.GitHub.Poll, wantGitHub)
	}
	for _, bad := range []string{"build:\n  compat_cflags: -w\n", "github:\n  token: ghp_x\n", "github:\n  httpclient: {}\n"} {
		if _, err := Load([]byte(bad), "c.yaml"); err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%q: %v, want an unknown key", bad, err)
		}
	}
}
