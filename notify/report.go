package notify

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pgbisect/pgbisect/internal/base/redact"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Options adjust how a report is rendered.
type Options struct {
	// PlotURL is put before plot file names in Markdown image links: empty
	// links them relative to the report file; an issue body needs an
	// absolute URL where the report directory is served, and without one
	// it names the files instead of showing them.
	PlotURL string
	// MaxLen clips the body to at most MaxLen bytes (0: no limit). Issue
	// bodies use MaxBody.
	MaxLen int
	// Marker is an HTML comment put first in a Markdown body so the poster
	// can recognise its own posts; empty for report files.
	Marker string
}

// MaxBody is the clipping limit for issue and comment bodies. GitHub rejects
// bodies over 65,536 characters; bytes are counted, which is never fewer than
// characters, and room is left for the marker.
const MaxBody = 65000

// Markdown renders f as a GitHub issue body (without the title).
func Markdown(f *finding.Finding, o Options) string {
	// Credentials in any URL of the finding (a --repo with a token in its
	// reproduce line) never reach an issue.
	body := redact.String(clip(build(f, mdStyle{}, o), writeMarkdown, o.MaxLen-len(o.Marker)-1, true, f.ID))
	if o.Marker != "" {
		body = o.Marker + "\n" + body
	}
	return body
}

// Text renders f as plain text in the style of a mailing-list post (without
// the subject).
func Text(f *finding.Finding, o Options) string {
	return redact.String(clip(build(f, textStyle{}, o), writeText, o.MaxLen, false, f.ID))
}

// build lays out the report of f.
func build(f *finding.Finding, st style, o Options) doc {
	var d doc
	lead := section{}
	if !st.markdown() {
		lead.blocks = append(lead.blocks, para{"Hi,"})
	}
	lead.blocks = append(lead.blocks, para{verdict(f, st)})
	if f.FollowUp != nil {
		s := fmt.Sprintf("This is news about %s", commitRef(f.FollowUp.Culprit, st))
		if f.FollowUp.FindingID != "" {
			s += fmt.Sprintf(", reported in finding %s", st.code(f.FollowUp.FindingID))
		}
		lead.blocks = append(lead.blocks, para{s + "."})
	}
	d.sections = append(d.sections, lead)

	if len(f.Culprits) > 0 {
		s := section{heading: "Culprit"}
		if len(f.Culprits) > 1 {
			s.heading = "Culprits"
		}
		var items []string
		for _, c := range f.Culprits {
			items = append(items, culpritText(c, st, skipPhrase(f)))
		}
		s.blocks = append(s.blocks, list{items: items, ordered: len(items) > 1})
		d.sections = append(d.sections, s)
	}

	if s, ok := revertSection(f, st); ok {
		d.sections = append(d.sections, s)
	}

	res := section{heading: "Results"}
	res.blocks = append(res.blocks, para{fmt.Sprintf("Median ± relative standard deviation of n runs, each on a freshly started server; "+
		"change is bad against good with its %s confidence interval; p is the test that the samples differ. "+
		"↓ lower is better, ↑ higher is better.", confidence(firstConfidence(f)))})
	if f.Counter != "" {
		res.blocks = append(res.blocks, para{counterNote(f, st)})
	}
	for _, c := range f.Culprits {
		if len(c.Comparisons) == 0 {
			continue
		}
		curve := ""
		if len(f.Points) > 0 {
			curve = " at every point, the curve before and after it (a curve check measured it where the bisection did not blame it)"
		}
		res.blocks = append(res.blocks, para{fmt.Sprintf("%s against its parent %s%s:", commitRef(culpritTip(c), st), st.code(finding.KeyHash(c.Parent)), curve)})
		res.blocks = append(res.blocks, comparisonTable(c.Comparisons, st))
		if c.Native != nil {
			res.blocks = append(res.blocks, para{nativeNote(c, st)})
		}
	}
	if len(f.Comparisons) > 0 {
		res.blocks = append(res.blocks, para{fmt.Sprintf("Endpoints, %s (good) against %s (bad):", commitRef(f.Good, st), commitRef(f.Bad, st))})
		res.blocks = append(res.blocks, comparisonTable(f.Comparisons, st))
	}
	if len(res.blocks) > 1 {
		d.sections = append(d.sections, res)
	}

	if s, ok := profileSection(f, st, o); ok {
		d.sections = append(d.sections, s)
	}

	if len(f.Warnings) > 0 {
		var items []string
		for _, w := range f.Warnings {
			items = append(items, st.esc(w))
		}
		d.sections = append(d.sections, section{heading: "Warnings", blocks: []block{list{items: items}}})
	}

	if len(f.Log) > 0 {
		d.sections = append(d.sections, logSection(f, st))
	}
	if s, ok := serverLogSection(f, st); ok {
		d.sections = append(d.sections, s)
	}

	if len(f.Plots) > 0 {
		s := section{heading: "Plots"}
		if st.markdown() && (o.PlotURL != "" || o.Marker == "") {
			var imgs []string
			for _, p := range f.Plots {
				if strings.HasSuffix(p, ".png") {
					svg := strings.TrimSuffix(p, ".png") + ".svg"
					imgs = append(imgs, fmt.Sprintf("![%s](%s%s) ([SVG](%s%s))", strings.TrimSuffix(p, ".png"), o.PlotURL, p, o.PlotURL, svg))
				}
			}
			s.blocks = append(s.blocks, para{strings.Join(imgs, "\n")})
		} else {
			s.blocks = append(s.blocks, para{fmt.Sprintf("Written next to the report of finding %s: %s.", st.code(f.ID), strings.Join(f.Plots, ", "))})
		}
		d.sections = append(d.sections, s)
	}

	if env := envPairs(f.Env, st); len(env) > 0 {
		d.sections = append(d.sections, section{heading: "Environment", blocks: []block{kv{env}}})
	}
	if b := buildPairs(f.Build, st); len(b) > 0 {
		d.sections = append(d.sections, section{heading: "Build options", blocks: []block{kv{b}}})
	}
	if len(f.Settings) > 0 {
		var pairs [][2]string
		for _, k := range sortedKeys(f.Settings) {
			pairs = append(pairs, [2]string{st.esc(k), st.code(f.Settings[k])})
		}
		d.sections = append(d.sections, section{heading: "Server settings", blocks: []block{kv{pairs}}})
	}
	if len(f.Steps) > 0 {
		text := fmt.Sprintf("Each sample ran the workload steps %s.", joinCode(f.Steps, st))
		if len(f.StepsSkipped) > 0 {
			text = strings.TrimSuffix(text, ".") + fmt.Sprintf("; not run: %s, which feed no metric this bisection judges or records.", joinCode(f.StepsSkipped, st))
		}
		d.sections = append(d.sections, section{heading: "Workload", blocks: []block{para{text}}})
	}
	if f.Reproduce != "" {
		d.sections = append(d.sections, section{heading: "To reproduce", blocks: []block{code{"sh", f.Reproduce}}})
	}

	footer := fmt.Sprintf("pgbisect finding %s: started %s, finished %s, took %s; %d builds, %d runs.",
		f.ID, stamp(f.Started), stamp(f.Finished), dur(f.Duration()), f.Builds, f.Samples)
	if f.SamplesBy != nil {
		footer = strings.TrimSuffix(footer, ".") + fmt.Sprintf(" (%s).", f.SamplesBy)
	}
	if st.markdown() {
		d.sections = append(d.sections, section{blocks: []block{small{footer}}})
	} else {
		d.sections = append(d.sections, section{blocks: []block{small{"-- \n" + footer}}})
	}
	return d
}

// counterNote says that the finding was judged on a count, and what a
// count cannot see.
func counterNote(f *finding.Finding, st style) string {
	return fmt.Sprintf("Judged on %s, instructions counted by %s: the instructions the server executed while it served the step. "+
		"A count barely moves from run to run, but it cannot see time spent waiting (locks, I/O, WAL flushes); "+
		"the elapsed times below, from runs without a counter, are recorded, not judged.", st.code(f.Metric), f.Counter)
}

// nativeNote gives a culprit's elapsed time against its parent's from
// native runs.
func nativeNote(c finding.Culprit, st style) string {
	n := c.Native
	side := func(s finding.Side) string {
		return fmt.Sprintf("%s %s ± %.1f%% (n %d)", number(s.Median), n.Unit, 100*s.RelStddev, s.N)
	}
	return fmt.Sprintf("Elapsed time of step %s without a counter (recorded, not judged): parent %s, culprit %s, ratio %.3f.",
		st.code(n.Step), side(n.Parent), side(n.Culprit), n.Ratio)
}

// verdict is the one-line verdict that opens every report.
func verdict(f *finding.Finding, st style) string {
	where := fmt.Sprintf("on %s between %s and %s", st.esc(f.Branch), st.code(finding.KeyHash(f.Good)), st.code(finding.KeyHash(f.Bad)))
	switch f.Kind {
	case finding.Regression, finding.Improvement:
		verb := "regressed"
		if f.Kind == finding.Improvement {
			verb = "improved"
		}
		if len(f.Culprits) == 1 {
			c := f.Culprits[0]
			return fmt.Sprintf("%s %s %s %s: %s.", st.bold(titleCase(string(f.Kind))+":"), culpritPhrase(c, st), verb, st.esc(f.Scenario), effect(mainComparison(c.Comparisons, f.Kind), f.Kind, st))
		}
		var parts []string
		for _, c := range f.Culprits {
			parts = append(parts, fmt.Sprintf("%s by %s", culpritPhrase(c, st), effect(mainComparison(c.Comparisons, f.Kind), f.Kind, st)))
		}
		return fmt.Sprintf("%s %d commits %s %s %s: %s.", st.bold(titleCase(string(f.Kind))+":"), len(f.Culprits), verb, st.esc(f.Scenario), where, strings.Join(parts, "; and "))
	case finding.NoRegression:
		s := fmt.Sprintf("%s %s is not worse than %s for %s on %s", st.bold("No regression reproduced:"), st.code(finding.KeyHash(f.Bad)), st.code(finding.KeyHash(f.Good)), st.esc(f.Scenario), st.esc(f.Branch))
		if c := mainComparison(f.Comparisons, ""); c != nil {
			s += ": " + effect(c, "", st)
		}
		return s + ", so there is nothing to bisect."
	case finding.BuildFailure:
		return fmt.Sprintf("%s the commits needed to decide %s %s %s; the bisection log shows which.", st.bold("Build failure:"), st.esc(f.Scenario), where, skipPhrase(f))
	case finding.Inconclusive:
		s := fmt.Sprintf("%s the sample budget ran out before %s could be called same or different %s", st.bold("Inconclusive:"), st.esc(f.Scenario), where)
		if c := mainComparison(f.Comparisons, ""); c != nil {
			s += ": " + effect(c, "", st)
		}
		return s + "."
	}
	return st.esc(string(f.Kind))
}

// effect says how much one comparison changed, signed, and which way is
// better: "elapsed +10.4% at clients=1, lower is better (95% CI +8.9% to
// +12.0%, p = 0.0002)".
func effect(c *finding.Comparison, kind finding.Kind, st style) string {
	if c == nil {
		return "no comparison recorded"
	}
	s := st.esc(c.Metric) + " " + pct(c.Ratio)
	if kind == finding.Regression || kind == finding.Improvement {
		s = st.bold(s)
	}
	if c.Point != "" {
		s += " at " + st.esc(c.Point)
	}
	if dw := directionWord(c.Direction); dw != "" {
		s += ", " + dw
	}
	return s + fmt.Sprintf(" (%s CI %s, p = %s)", confidence(c.Confidence), interval(c.RatioLow, c.RatioHigh, " to "), pvalue(c.P))
}

// culpritPhrase names a culprit in a sentence: `9f8377f7a2` ("Add a
// DEFAULT option to COPY FROM"), or a range.
func culpritPhrase(c finding.Culprit, st style) string {
	if c.IsRange() {
		return fmt.Sprintf("one of the %d commits %s..%s", len(c.Range), commitRef(c.Range[0], st), commitRef(c.Range[len(c.Range)-1], st))
	}
	s := "commit " + commitRef(c.Commit, st)
	if c.Commit.Subject != "" {
		s += fmt.Sprintf(" (\"%s\")", st.esc(finding.FirstLine(c.Commit.Subject)))
	}
	return s
}

// commitRef is a commit's short hash, linked where it has a URL.
func commitRef(c finding.Commit, st style) string {
	return st.link(st.code(finding.KeyHash(c)), c.URL)
}

// skipPhrase says why the log skipped commits: "do not build", "cannot be
// measured", or both.
func skipPhrase(f *finding.Finding) string {
	var broken, unmeasurable bool
	for _, s := range f.Log {
		broken = broken || s.Verdict == finding.StepUnbuildable
		unmeasurable = unmeasurable || s.Verdict == finding.StepUnmeasurable
	}
	switch {
	case broken && unmeasurable:
		return "do not build or cannot be measured"
	case unmeasurable:
		return "cannot be measured"
	}
	return "do not build"
}

// culpritText describes a culprit in the culprit list; why says why the
// commits around a range were skipped (skipPhrase).
func culpritText(c finding.Culprit, st style, why string) string {
	if c.IsRange() {
		var b strings.Builder
		fmt.Fprintf(&b, "One of %d commits; the commits around them %s, so the range cannot be narrowed:", len(c.Range), why)
		for _, r := range c.Range {
			b.WriteString("\n" + commitLine(r, st))
		}
		return b.String()
	}
	s := commitLine(c.Commit, st)
	if c.Commit.URL != "" && !st.markdown() {
		s += "\n" + c.Commit.URL
	}
	if c.Verified {
		s += fmt.Sprintf("\nRe-measured against its parent %s before being blamed.", st.code(finding.KeyHash(c.Parent)))
	} else {
		s += fmt.Sprintf("\nNot re-measured against its parent %s.", st.code(finding.KeyHash(c.Parent)))
	}
	return s
}

// commitLine is "`9f8377f7a2` Add a DEFAULT option to COPY FROM (Andrew
// Dunstan, 2023-03-13)".
func commitLine(c finding.Commit, st style) string {
	s := commitRef(c, st)
	if c.Subject != "" {
		s += " " + st.esc(finding.FirstLine(c.Subject))
	}
	var by []string
	if c.Author != "" {
		by = append(by, st.esc(authorName(c.Author)))
	}
	if !c.Date.IsZero() {
		by = append(by, day(c.Date))
	}
	if len(by) > 0 {
		s += " (" + strings.Join(by, ", ") + ")"
	}
	return s
}

// authorName drops the e-mail address: bots should not spread addresses.
func authorName(a string) string {
	if i := strings.Index(a, " <"); i > 0 {
		return a[:i]
	}
	return a
}

func culpritTip(c finding.Culprit) finding.Commit {
	if c.IsRange() {
		return c.Range[len(c.Range)-1]
	}
	return c.Commit
}

func comparisonTable(cs []finding.Comparison, st style) table {
	withPoint := false
	for _, c := range cs {
		withPoint = withPoint || c.Point != ""
	}
	t := table{head: []string{"metric"}}
	if withPoint {
		t.head = append(t.head, "point")
	}
	t.head = append(t.head, "good", "change (CI)", "bad", "p", "n", "verdict")
	t.right = make([]bool, len(t.head))
	for i := range t.right {
		t.right[i] = i >= len(t.head)-6 && i < len(t.head)-1
	}
	for _, c := range cs {
		r := []string{st.esc(c.Metric) + arrow(c.Direction)}
		if withPoint {
			r = append(r, st.esc(c.Point))
		}
		change := pct(c.Ratio)
		if c.Verdict == string(finding.Regression) || c.Verdict == string(finding.Improvement) {
			change = st.bold(change)
		}
		change += " (" + interval(c.RatioLow, c.RatioHigh, " … ") + ")"
		if !st.markdown() {
			change = pct(c.Ratio) + " (" + interval(c.RatioLow, c.RatioHigh, " .. ") + ")"
		}
		verdict := c.Verdict
		if c.Curve {
			verdict += " (curve check)"
		}
		r = append(r, side(c.Good, c.Unit), change, side(c.Bad, c.Unit), pvalue(c.P),
			fmt.Sprintf("%d/%d", c.Good.N, c.Bad.N), st.esc(verdict))
		t.rows = append(t.rows, r)
	}
	return t
}

func arrow(d stats.Direction) string {
	switch d {
	case stats.LowerIsBetter:
		return " ↓"
	case stats.HigherIsBetter:
		return " ↑"
	}
	return ""
}

func logSection(f *finding.Finding, st style) section {
	s := section{heading: "Bisection log"}
	what := st.esc(f.Metric)
	if f.Point != "" {
		what += " at " + st.esc(f.Point)
	}
	if dw := directionWord(f.Direction); dw != "" {
		what += " (" + dw + ")"
	}
	s.blocks = append(s.blocks, para{fmt.Sprintf("Each commit measured, in the order measured; median of %s.", what)})
	t := table{head: []string{"#", "commit", "median", "n", "verdict", "subject"}, right: []bool{true, false, true, true}, log: true}
	if len(f.Points) > 0 {
		return curveLogSection(f, st, s, t)
	}
	for i, step := range f.Log {
		med, n := "", ""
		if step.N > 0 {
			med, n = value(step.Median, f.Unit), fmt.Sprint(step.N)
		}
		v := step.Verdict
		if step.Note != "" {
			v += ": " + abbrev(finding.FirstLine(step.Note), 60)
		}
		t.rows = append(t.rows, []string{fmt.Sprint(i + 1), st.link(st.code(finding.KeyHash(step.Commit)), step.Commit.URL), med, n, st.esc(v), st.esc(finding.FirstLine(step.Commit.Subject))})
	}
	s.blocks = append(s.blocks, t)
	return s
}

// serverLogSection shows the tail of the server log of every commit of the
// log that could not be measured: what failed is in it (a PANIC, a failed
// assertion, a FATAL at start).
func serverLogSection(f *finding.Finding, st style) (section, bool) {
	s := section{heading: "Server logs of commits that could not be measured"}
	for _, step := range f.Log {
		if step.ServerLog == "" {
			continue
		}
		line := commitRef(step.Commit, st) + " " + st.esc(finding.FirstLine(step.Commit.Subject))
		if step.Note != "" {
			line += ": " + st.esc(step.Note)
		}
		s.blocks = append(s.blocks, para{line}, code{"", step.ServerLog})
	}
	return s, len(s.blocks) > 0
}

func envPairs(e finding.Environment, st style) [][2]string {
	var p [][2]string
	add := func(k, v string) {
		if v != "" {
			p = append(p, [2]string{k, st.esc(v)})
		}
	}
	add("host", e.Host)
	add("OS", e.OS)
	add("kernel", e.Kernel)
	add("CPU", e.CPU)
	if e.Cores > 0 {
		add("cores", fmt.Sprint(e.Cores))
	}
	if e.MemoryMB > 0 {
		add("memory", memory(e.MemoryMB))
	}
	add("governor", e.Governor)
	add("filesystem", e.Filesystem)
	if e.LoadAvg > 0 || len(p) > 0 {
		add("load average", fmt.Sprintf("%.2f", e.LoadAvg))
	}
	for _, k := range sortedKeys(e.Extra) {
		add(k, e.Extra[k])
	}
	return p
}

func buildPairs(b finding.BuildInfo, st style) [][2]string {
	var p [][2]string
	add := func(k, v string) {
		if v != "" {
			p = append(p, [2]string{k, v})
		}
	}
	add("system", st.esc(b.System))
	if len(b.Configure) > 0 {
		add("configure", st.code(strings.Join(b.Configure, " ")))
	}
	if b.CFLAGS != "" {
		add("CFLAGS", st.code(b.CFLAGS))
	}
	if len(b.MesonOptions) > 0 {
		add("meson", st.code(strings.Join(b.MesonOptions, " ")))
	}
	add("compiler", st.esc(b.Compiler))
	if b.ClientBin != "" {
		add("client tools", st.code(b.ClientBin))
	}
	if b.Key != "" {
		add("build key", st.code(b.Key))
	}
	return p
}

func firstConfidence(f *finding.Finding) float64 {
	for _, c := range f.Culprits {
		for _, cmp := range c.Comparisons {
			return cmp.Confidence
		}
	}
	for _, cmp := range f.Comparisons {
		return cmp.Confidence
	}
	return 0.95
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// clip renders d and, when the result is longer than maxLen bytes, clips
// the bisection log first (keeping its first and last steps), then, if the
// rest alone is still too long, cuts the tail. A note says what was cut; the
// verdict and the result tables come first and are kept.
func clip(d doc, write func(doc) string, maxLen int, md bool, id string) string {
	s := write(d)
	if maxLen <= 0 || len(s) <= maxLen {
		return s
	}
	note := func(text string) string {
		if md {
			return "\n> [!NOTE]\n> " + text + "\n"
		}
		return "\n[" + text + "]\n"
	}
	_, total := d.clipLog(math.MaxInt)
	if total > 0 {
		// The longest log that fits, by bisection on the number of rows kept.
		best := ""
		for lo, hi := 0, total-1; lo <= hi; {
			mid := (lo + hi) / 2
			c, _ := d.clipLog(mid)
			if out := write(c) + note(logNote(mid, total, id)); len(out) <= maxLen {
				best, lo = out, mid+1
			} else {
				hi = mid - 1
			}
		}
		if best != "" {
			return best
		}
	}
	c, _ := d.clipLog(0)
	s = write(c)
	text := fmt.Sprintf("This body was clipped to %d characters to fit GitHub's limit of 65,536: everything after this point was cut, including %d steps of the bisection log. The full report is the JSON of finding %s.", maxLen, total, id)
	n := note(text)
	cut := maxLen - len(n) - 8
	if cut < 0 {
		cut = 0
	}
	s = s[:cut]
	if i := strings.LastIndexByte(s, '\n'); i > 0 {
		s = s[:i+1]
	}
	s = strings.ToValidUTF8(s, "")
	if md && strings.Count(s, "```")%2 == 1 {
		s += "```\n"
	}
	return s + n
}

func logNote(kept, total int, id string) string {
	return fmt.Sprintf("The bisection log was clipped to fit GitHub's limit of 65,536 characters: %d of its %d steps are shown (the first %d and the last %d). The full log is in the JSON report of finding %s.",
		kept, total, kept/2, kept-kept/2, id)
}

// abbrev shortens s to at most n runes, ending it with "…" when cut.
func abbrev(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// joinCode lists names as code, comma-separated.
func joinCode(names []string, st style) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = st.code(n)
	}
	return strings.Join(out, ", ")
}
