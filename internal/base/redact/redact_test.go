package redact

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://bob:s3cret@db.example/results", "postgres://bob:xxxxx@db.example/results"},
		{"postgresql://bob:s3:cr@t@h1,h2:5433/db?sslmode=require", "postgresql://bob:xxxxx@h1,h2:5433/db?sslmode=require"},
		{"postgres://bob@db/results?password=s3cret&sslmode=disable", "postgres://bob@db/results?password=xxxxx&sslmode=disable"},
		{"postgres:///r?host=/run&sslpassword=k3y", "postgres:///r?host=/run&sslpassword=xxxxx"},
		{"host=db user=bob password=s3cret dbname=r", "host=db user=bob password=xxxxx dbname=r"},
		{"host=db password = 's3 cr\\'et' dbname=r", "host=db password = xxxxx dbname=r"},
		{"password=s3cret", "password=xxxxx"},
		{"clone https://bob:ghp_abc123@github.com/o/r.git failed", "clone https://bob:xxxxx@github.com/o/r.git failed"},
		{"--repo https://ghp_abcdefABCDEF0123456789@github.com/o/r", "--repo https://xxxxx@github.com/o/r"},
		{"https://github.com/o/r and postgres:///pgbisect?host=/var/lib/pgbisect/db/run&passfile=/x/passfile",
			"https://github.com/o/r and postgres:///pgbisect?host=/var/lib/pgbisect/db/run&passfile=/x/passfile"},
		{"git@github.com:o/r.git", "git@github.com:o/r.git"},
	} {
		got := String(c.in)
		if got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "ghp_abc", "k3y", "s3 cr"} {
			if strings.Contains(got, secret) {
				t.Errorf("String(%q) = %q still holds %q", c.in, got, secret)
			}
		}
	}
}
