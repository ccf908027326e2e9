package notify

import (
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Target is one post a finding makes: an issue to create or comment on.
type Target struct {
	// Key is the title prefix that identifies the issue of one culprit,
	// "[master] 9f8377f7a2:". An open issue whose title starts with Key is
	// that culprit's issue, whatever scenario first reported it.
	Key string `json:"key"`
	// Title is the title of a new issue.
	Title string `json:"title"`
	// Create is true when the target may open a new issue; false when the
	// finding is only news for an issue that already exists (improvements,
	// "no longer reproduces").
	Create bool `json:"create"`
}

// Targets returns the posts f makes, in order. A regression makes one per
// culprit; an improvement or a follow-up comments on the culprit's issue
// (FollowUp, else its own culprits) only if one is open; a finding with no
// culprit and no FollowUp makes none: it is reported, not posted.
func Targets(f *finding.Finding) []Target {
	keys := finding.TargetKeys(f)
	if f.FollowUp != nil && f.FollowUp.Culprit.Hash != "" {
		return []Target{{Key: keys[0], Title: keys[0] + " " + headline(f, nil), Create: false}}
	}
	ts := make([]Target, len(keys))
	for i, key := range keys {
		ts[i] = Target{Key: key, Title: key + " " + headline(f, &f.Culprits[i]), Create: f.Kind == finding.Regression}
	}
	return ts
}

// Title is the title of f's report: that of its first target, or one naming
// the range when f has no culprit.
func Title(f *finding.Finding) string {
	if f.Kind == finding.Regression || f.Kind == finding.Improvement {
		if len(f.Culprits) > 0 {
			c := &f.Culprits[0]
			return fmt.Sprintf("[%s] %s: %s", f.Branch, finding.CulpritKey(c), headline(f, c))
		}
	}
	return fmt.Sprintf("[%s] %s", f.Branch, headline(f, nil))
}

// headline is the title after the key: "copy-single elapsed +10.4%
// regression (lower is better)", the signed change of the metric with the
// way it is better, or for a finding without a culprit what happened in which
// range.
func headline(f *finding.Finding, c *finding.Culprit) string {
	if c != nil {
		if cmp := mainComparison(c.Comparisons, f.Kind); cmp != nil {
			s := fmt.Sprintf("%s %s", f.Scenario, cmp.Metric)
			if cmp.Point != "" {
				s += " at " + cmp.Point
			}
			s += " " + pct(cmp.Ratio) + " " + string(f.Kind)
			var notes []string
			if dw := directionWord(comparisonDirection(cmp, f)); dw != "" {
				notes = append(notes, dw)
			}
			if c.IsRange() {
				notes = append(notes, fmt.Sprintf("one of %d commits", len(c.Range)))
			}
			if len(notes) > 0 {
				s += " (" + strings.Join(notes, "; ") + ")"
			}
			return s
		}
		return fmt.Sprintf("%s %s", f.Scenario, f.Kind)
	}
	rng := finding.KeyHash(f.Good) + ".." + finding.KeyHash(f.Bad)
	switch f.Kind {
	case finding.NoRegression:
		return fmt.Sprintf("%s: no regression reproduced in %s", f.Scenario, rng)
	case finding.BuildFailure:
		return fmt.Sprintf("%s: build failure in %s", f.Scenario, rng)
	case finding.Inconclusive:
		return fmt.Sprintf("%s: inconclusive in %s", f.Scenario, rng)
	}
	return fmt.Sprintf("%s: %s in %s", f.Scenario, f.Kind, rng)
}

// comparisonDirection is c's direction, else the finding's.
func comparisonDirection(c *finding.Comparison, f *finding.Finding) stats.Direction {
	if c.Direction != "" {
		return c.Direction
	}
	return f.Direction
}

// mainComparison is the comparison with the largest effect among those whose
// verdict is the finding's kind, else among all.
func mainComparison(cs []finding.Comparison, kind finding.Kind) *finding.Comparison {
	var best *finding.Comparison
	for pass := 0; pass < 2 && best == nil; pass++ {
		for i := range cs {
			c := &cs[i]
			if pass == 0 && c.Verdict != string(kind) {
				continue
			}
			if best == nil || math.Abs(c.Ratio-1) > math.Abs(best.Ratio-1) {
				best = c
			}
		}
	}
	return best
}

// pct formats a ratio as a signed percent change: 1.104 -> "+10.4%".
func pct(ratio float64) string {
	if ratio == 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		return "?%"
	}
	p := (ratio - 1) * 100
	if math.Abs(p) < 0.05 {
		return "0.0%"
	}
	return fmt.Sprintf("%+.1f%%", p)
}

// CommitURL returns the web page of a commit of the repository at repo (a
// clone URL or directory), or "" when the host is not one pgbisect knows:
// GitHub, GitLab and git.postgresql.org's gitweb.
func CommitURL(repo, hash string) string {
	if hash == "" {
		return ""
	}
	r := strings.TrimSuffix(strings.TrimSuffix(repo, "/"), ".git")
	if rest, ok := strings.CutPrefix(r, "git@github.com:"); ok {
		return "https://github.com/" + rest + "/commit/" + hash
	}
	u, err := url.Parse(r)
	if err != nil || u.Host == "" {
		return ""
	}
	path := strings.Trim(u.Path, "/")
	switch {
	case u.Host == "github.com":
		return "https://github.com/" + path + "/commit/" + hash
	case u.Host == "gitlab.com":
		return "https://gitlab.com/" + path + "/-/commit/" + hash
	case u.Host == "git.postgresql.org":
		name := path[strings.LastIndex(path, "/")+1:] + ".git"
		return "https://git.postgresql.org/gitweb/?p=" + name + ";a=commitdiff;h=" + hash
	}
	return ""
}
