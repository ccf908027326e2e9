package config

import (
	"strings"
	"testing"
)

func TestLoadErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"typo", "repo: /x\nbuild:\n  configur: [--enable-debug]\n", `pgbisect.yaml:3: unknown key "configur" (did you mean "configure"?)`},
		{"type", "build:\n  jobs: many\n", "pgbisect.yaml:2:"},
		{"range", "stats:\n  min_effect: 3\n", "stats.min_effect 3 is out of range"},
		{"tz", "nightly:\n  time_zone: Mars/Olympus\n", `nightly.time_zone "Mars/Olympus"`},
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
	if c.Branch != "REL_16_STABLE" || c.StateDir != "/tmp/st" || c.RunAs != "postgres" || c.Nightly.Schedule == "" {
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
