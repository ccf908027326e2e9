package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
)

// TestBisectChecksInputFirst checks that mistakes are reported before any
// build starts, with what to do about them.
func TestBisectChecksInputFirst(t *testing.T) {
	repo, c1, _, c3, _ := gittest.Repo(t)
	state := t.TempDir()
	single := "../../../configs/scenarios/copy-single.yaml"
	multi := "../../../configs/scenarios/copy-concurrent.yaml"
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing revisions", []string{"-s", single}, 2, "give -s SCENARIO, --good REV and --bad REV"},
		{"positional", []string{"-s", single, "--good", c1, "--bad", c3, "extra"}, 2, "unexpected argument"},
		{"swapped", []string{"-s", single, "--good", c3, "--bad", c1}, 2, "swap --good and --bad"},
		{"same", []string{"-s", single, "--good", c3, "--bad", c3}, 2, "same commit"},
		{"unknown revision", []string{"-s", single, "--good", "nosuchrev", "--bad", c3}, 1, "good revision"},
		{"unknown metric", []string{"-s", single, "--good", c1, "--bad", c3, "--metric", "copy_tme"}, 2, `did you mean "copy_time"`},
		{"several points", []string{"-s", multi, "--good", c1, "--bad", c3}, 2, "choose one with --point"},
		{"bad point", []string{"-s", multi, "--good", c1, "--bad", c3, "--point", "clients=3"}, 2, "clients=3"},
		{"bad scenario", []string{"-s", "nosuch.yaml", "--good", c1, "--bad", c3}, 1, "nosuch.yaml"},
		{"min effect", []string{"-s", single, "--good", c1, "--bad", c3, "--min-effect", "5"}, 2, "fraction"},
		{"profile runs", []string{"-s", single, "--good", c1, "--bad", c3, "--profile-runs", "-1"}, 2, "--profile-runs -1"},
		{"unknown resume", []string{"--resume", "0123456789ab"}, 1, "no such bisection"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"bisect", "--state", state, "--repo", repo}, tt.args...)
			code := Main(context.Background(), args, &out, &errb)
			if code != tt.code || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errb.String(), tt.code, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(filepath.Join(state, "builds")); len(entries) > 0 {
		t.Errorf("a build was started although every input was wrong")
	}
}
