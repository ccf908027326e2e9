package intake

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
)

// scenarios are the shipped scenarios, the bot's in these tests.
func scenarios(t testing.TB) app.Scenarios {
	dir, err := filepath.Abs("../../../configs/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	return app.Scenarios{Dirs: []string{dir}}
}

func TestParseCommands(t *testing.T) {
	parse := Commands{Scenarios: scenarios(t)}.Parse
	req, err := parse(context.Background(), strings.Fields("bisect copy-single --good REL_15_0 --bad REL_16_0 --metric copy_time --set rows=1000 --max-time 8h"))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := req.Request.(app.BisectRequest); !ok || req.Kind != "bisect" || b.Scenario != "copy-single" || b.Good != "REL_15_0" || b.Set["rows"] != "1000" || b.MaxTime != 8*time.Hour {
		t.Errorf("bisect: %+v", req)
	}
	req, err = parse(context.Background(), strings.Fields("compare copy-concurrent REL_15_0 REL_16_0 --point clients=1"))
	if c, ok := req.Request.(app.CompareRequest); err != nil || !ok || req.Kind != "compare" || c.A != "REL_15_0" || c.B != "REL_16_0" || c.Point != "clients=1" {
		t.Errorf("compare: %+v %v", req, err)
	}
	for _, tc := range []struct{ cmd, want string }{
		{"bisect copy-singel --good A --bad B", `unknown scenario "copy-singel" (did you mean copy-single?)`},
		{"bisect copy-single --good A --badd B", "bisect: unknown flag --badd (did you mean --bad?)"},
		{"bisect ../../etc/passwd --good A --bad B", "give the name of one of the bot's scenarios, not a path"},
		{"bisect -s /etc/shadow --good A --bad B", `scenario "/etc/shadow": give the name of one of the bot's scenarios, not a path: the bot has`},
		{"bisect copy-single --good A --bad B --set rows=1;id", "rows is an integer"},
		{"bisect copy-single --good A --bad B --set persistence=$(id)", "a value set for a variable is a word"},
		{"bisect copy-single --good A --bad B --client-bin /tmp", "--client-bin names a directory"},
		{"compare copy-single /usr/lib/postgresql/15/bin REL_16_0", "is not a revision"},
		{"bisct copy-single", `unknown command "bisct" (did you mean bisect?)`},
		{"bisect copy-single --good A --bad B --max-time -1h", "--max-time -1h0m0s is negative"},
		{"compare copy-single A", "compare takes a scenario and two revisions"},
		{"cancel x", `job ID "x" is not a number`},
		{"", "there is no command after the handle"},
	} {
		if _, err := parse(context.Background(), strings.Fields(tc.cmd)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.cmd, err, tc.want)
		}
	}
}

// TestParseIgnoresTheCommandLinesPlaces: a bisect command takes every flag
// of 'pgbisect bisect', the command line's places (--config, --db, ...)
// included, as it always did, and they change nothing: the bot's own
// config, store and machine class decide.
func TestParseIgnoresTheCommandLinesPlaces(t *testing.T) {
	parse := Commands{Scenarios: scenarios(t)}.Parse
	plain, err := parse(context.Background(), strings.Fields("bisect copy-single --good A --bad B"))
	if err != nil {
		t.Fatal(err)
	}
	placed, err := parse(context.Background(), strings.Fields("bisect copy-single --good A --bad B --config /etc/x.yaml --db postgres://x --state /tmp --repo /r --class big --json"))
	if err != nil || placed.Request.(app.BisectRequest).Scenario != plain.Request.(app.BisectRequest).Scenario || placed.Summary != plain.Summary {
		t.Errorf("with the command line's places: %+v %v, without: %+v", placed, err, plain)
	}
	if _, err := parse(context.Background(), strings.Fields("compare copy-single A --patch https://x.example/p.diff")); err == nil || !strings.Contains(err.Error(), "takes no patches") {
		t.Errorf("a patch without a fetcher: %v", err)
	}
}
