// Package finding is what pgbisect found: the culprits of a bisection with
// the evidence behind them (verdicts, intervals, samples), the endpoint
// comparison, the bisection log, and the machine and build the numbers come
// from. It is the model that package notify renders and package store
// persists; neither knows the other.
//
// The one design choice that matters: a Finding is plain data, filled once
// (FromBisection for a bisection, the nightly pass for a night's change) and
// never recomputed, so every report of one finding says the same thing. Its
// JSON form is stable: fields are only added, and FormatVersion guards
// readers against newer files.
package finding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
)

// FormatVersion is the version of the JSON form of a Finding. Readers
// reject findings with a newer version.
const FormatVersion = 1

// Kind says what a finding is about.
type Kind string

// The kinds of finding.
const (
	// Regression: the bad side is worse; Culprits names the commit(s).
	Regression Kind = "regression"
	// Improvement: a commit made things better (or undid a regression).
	Improvement Kind = "improvement"
	// NoRegression: the endpoints were measured and the bad commit is not
	// worse than the good one, so there is nothing to bisect (or a reported
	// regression no longer reproduces).
	NoRegression Kind = "no-regression-reproduced"
	// BuildFailure: an endpoint, or every commit of a candidate range, does
	// not build.
	BuildFailure Kind = "build-failure"
	// Inconclusive: the sample budget ran out before a verdict.
	Inconclusive Kind = "inconclusive"
)

var kinds = []Kind{Regression, Improvement, NoRegression, BuildFailure, Inconclusive}

// Finding is everything one report says. It is filled by FromBisection and
// by the nightly pass, and is also the JSON report format and what the results
// store persists: field names are stable, new fields are only added.
//
// Units: every measured value is in the unit of its metric; ratios are
// bad/good medians (1.104 = +10.4%); relative spreads are fractions.
type Finding struct {
	// Version is FormatVersion when written; 0 is read as FormatVersion.
	Version int `json:"version"`
	// ID names the finding; it is also a file name, so it may only hold
	// letters, digits, '.', '_' and '-'. See NewID.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Branch is the branch the commits are on ("master").
	Branch string `json:"branch"`
	// Scenario is the scenario name ("copy-single").
	Scenario string `json:"scenario"`
	// Metric, Unit, Direction and Point name what the bisection decided on;
	// the bisection log shows this metric at this point.
	Metric    string          `json:"metric"`
	Unit      string          `json:"unit,omitempty"`
	Direction stats.Direction `json:"direction,omitempty"`
	Point     string          `json:"point,omitempty"`
	// Counter is what counted Metric when it is an instruction count
	// (perf or valgrind; see bench's instructions metric): the report
	// says the finding was judged on a count, which cannot see waiting.
	Counter string `json:"counter,omitempty"`
	// Points are the matrix points of a bisection of several points, in
	// the scenario's order (Point is then their list, PointList); empty
	// otherwise. Each culprit's Comparisons then hold the curve: the
	// metric at every point, parent against culprit.
	Points []string `json:"points,omitempty"`

	// Good and Bad are the endpoints that were compared: the last nightly
	// and tonight's, or the user's --good and --bad.
	Good Commit `json:"good"`
	Bad  Commit `json:"bad"`
	// Culprits are the commits blamed, largest effect first. Empty unless
	// Kind is Regression or Improvement.
	Culprits []Culprit `json:"culprits,omitempty"`
	// Comparisons are the endpoint results, good against bad, one per
	// metric and matrix point.
	Comparisons []Comparison `json:"comparisons,omitempty"`
	// Log is the bisection log in the order the commits were measured.
	Log []Step `json:"log,omitempty"`
	// Reverts are the revert checks of the culprits (see RevertCheck).
	Reverts []RevertCheck `json:"reverts,omitempty"`

	// Series is the nightly history of Metric at Point, when the finding
	// comes from the nightly pass.
	Series *Series `json:"series,omitempty"`
	// Progress holds pgbench -P progress of individual runs of each side.
	Progress []Progress `json:"progress,omitempty"`
	// FollowUp names the earlier culprit this finding is news about: an
	// improvement that undoes it, or a re-run where it no longer
	// reproduces. Such findings are posted as comments on its issue.
	FollowUp *FollowUp `json:"follow_up,omitempty"`

	Env   Environment `json:"environment"`
	Build BuildInfo   `json:"build"`
	// Settings are the server settings (GUCs) the scenario sets.
	Settings map[string]string `json:"settings,omitempty"`
	// Reproduce is the exact command line that reproduces the finding.
	Reproduce string `json:"reproduce,omitempty"`
	// Steps are the workload steps each sample of a bisection ran, and
	// StepsSkipped the scenario's trailing steps it did not run because
	// they feed no metric it judges or records
	// (bench.Scenario.ForBisection).
	Steps        []string `json:"steps,omitempty"`
	StepsSkipped []string `json:"steps_skipped,omitempty"`

	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Builds counts the builds done (cache hits excluded); Samples counts
	// workload runs over all commits.
	Builds  int `json:"builds"`
	Samples int `json:"samples"`
	// SamplesBy says where a bisection's runs went, by phase and by the
	// verdict of the comparison each was taken for; nil for findings that
	// are not bisections (or were saved before it existed). Findings saved
	// before it was bisect.Spend count runs of improved comparisons as
	// undecided.
	SamplesBy *bisect.Spend `json:"samples_by,omitempty"`
	// Stopped is set when a bisection stopped at its time bound (--max-time)
	// before it was done: its partial answer.
	Stopped *Stopped `json:"stopped,omitempty"`
	// Warnings are caveats shown in every report: noisy samples, few runs,
	// an endpoint that needed a clean rebuild.
	Warnings []string `json:"warnings,omitempty"`
	// Plots lists plot files written next to the report (file names, no
	// directories); set by WriteReport.
	Plots []string `json:"plots,omitempty"`
}

// Commit is one commit as reports show it.
type Commit struct {
	Hash    string    `json:"hash"`
	Short   string    `json:"short,omitempty"` // 10 hex digits when empty
	Subject string    `json:"subject,omitempty"`
	Author  string    `json:"author,omitempty"` // "Name <email>"
	Date    time.Time `json:"date,omitzero"`    // author date
	// URL is the commit's web page when the repository has one (CommitURL).
	URL string `json:"url,omitempty"`
}

// ShortHash returns c.Short, or the first 10 digits of c.Hash.
func (c Commit) ShortHash() string {
	if c.Short != "" {
		return c.Short
	}
	if len(c.Hash) > 10 {
		return c.Hash[:10]
	}
	return c.Hash
}

// Culprit is a commit blamed for a change, or a range of candidates when
// skipped (unbuildable) commits border it.
type Culprit struct {
	// Commit is the culprit; for a range, the newest candidate.
	Commit Commit `json:"commit"`
	// Parent is the commit it was compared with (the good side).
	Parent Commit `json:"parent"`
	// Range lists every candidate, oldest first, when the culprit could not
	// be narrowed to one commit; empty otherwise.
	Range []Commit `json:"range,omitempty"`
	// Comparisons are culprit against parent, one per metric and point,
	// largest effect first; for a bisection of several points, one per
	// point in the points' order (the curve, see Finding.Points).
	Comparisons []Comparison `json:"comparisons"`
	// Verified is true when the culprit was re-measured against its parent
	// before being blamed.
	Verified bool `json:"verified"`
	// Profile is where the CPU time went, culprit against parent, when
	// they were profiled (profile.go).
	Profile *Profile `json:"profile,omitempty"`
	// Native is the elapsed time of the counted step, culprit against
	// parent, from a few runs without a counter, when the finding was
	// judged on instruction counts (Finding.Counter): recorded, not judged.
	Native *NativeTime `json:"native,omitempty"`
}

// NativeTime is the elapsed time of the step whose instructions were
// counted, measured natively (no counter) on the parent and the culprit.
type NativeTime struct {
	Step    string  `json:"step"`
	Unit    string  `json:"unit"`
	Parent  Side    `json:"parent"`
	Culprit Side    `json:"culprit"`
	Ratio   float64 `json:"ratio"` // culprit median / parent median
}

// IsRange reports whether c is a candidate range rather than one commit.
func (c Culprit) IsRange() bool { return len(c.Range) > 1 }

// Comparison is one metric at one matrix point, good side against bad side.
type Comparison struct {
	Metric    string          `json:"metric"`
	Unit      string          `json:"unit,omitempty"`
	Direction stats.Direction `json:"direction"`
	// Point is the matrix point ("clients=4"), empty for a scenario without
	// a matrix.
	Point string `json:"point,omitempty"`
	Good  Side   `json:"good"`
	Bad   Side   `json:"bad"`
	// Ratio is median(bad)/median(good) with its confidence interval.
	Ratio float64 `json:"ratio"`
	// Change is the signed relative change of the metric, Ratio-1 (-0.22:
	// 22% lower, which for a higher-is-better metric is worse), to six
	// decimals. Marshal fills it from Ratio; Direction says which way is
	// better.
	Change     float64 `json:"change"`
	RatioLow   float64 `json:"ratio_low"`
	RatioHigh  float64 `json:"ratio_high"`
	Confidence float64 `json:"confidence"` // 0.95
	// P is the p-value of the test that the samples differ.
	P float64 `json:"p"`
	// Verdict is "regression", "improvement", "same" or "inconclusive".
	Verdict string `json:"verdict"`
	// Curve is set on a culprit's comparison at a point where the
	// bisection of that point did not blame it: measured afterwards, for
	// the curve before and after the culprit, blaming nothing.
	Curve bool `json:"curve,omitempty"`
}

// Side summarizes one side's sample.
type Side struct {
	Median    float64 `json:"median"`
	RelStddev float64 `json:"rel_stddev"` // stddev/mean, a fraction
	N         int     `json:"n"`
}

// Step is one entry of the bisection log.
type Step struct {
	Commit Commit `json:"commit"`
	// Verdict is "good", "bad", "skipped", "unbuildable", "unmeasurable"
	// (builds, but a sample on it failed: initdb, start, a crash, the
	// workload), "no-compile" (changes nothing compiled, shares its
	// parent's build) or "inconclusive".
	Verdict string  `json:"verdict"`
	Median  float64 `json:"median,omitempty"`
	N       int     `json:"n,omitempty"`
	// Samples are the measured values of the bisection's metric, in run
	// order; used by the bisection plot.
	Samples []float64 `json:"samples,omitempty"`
	// Point is the matrix point of the step in the log of a bisection of
	// several points (the log holds each point's search in turn).
	Point string `json:"point,omitempty"`
	// Note is a short remark: the tail of a build error, "re-verified".
	Note string `json:"note,omitempty"`
	// ServerLog is the tail of the server log of an unmeasurable commit.
	ServerLog string `json:"server_log,omitempty"`
	// Order is the commit's position in the range, oldest first, so the
	// plot can place commits in history order whatever order they were
	// measured in.
	Order int `json:"order"`
}

// The step verdicts.
const (
	StepGood         = "good"
	StepBad          = "bad"
	StepSkipped      = "skipped"
	StepUnbuildable  = "unbuildable"
	StepUnmeasurable = "unmeasurable"
	StepNoCompile    = "no-compile"
	StepInconclusive = "inconclusive"
)

// Series is the nightly history of one metric at one point.
type Series struct {
	Metric string        `json:"metric"`
	Unit   string        `json:"unit,omitempty"`
	Point  string        `json:"point,omitempty"`
	Points []SeriesPoint `json:"points"`
	// ChangePoints are the indexes into Points where a change point
	// detection pass placed a shift (the first point after it).
	ChangePoints []ChangePoint `json:"change_points,omitempty"`
}

// SeriesPoint is one nightly result.
type SeriesPoint struct {
	At     time.Time `json:"at"`
	Commit string    `json:"commit"` // short hash
	Median float64   `json:"median"`
	// FindingID is set where the night's comparison led to a finding.
	FindingID string `json:"finding_id,omitempty"`
}

// ChangePoint is a shift found in a Series.
type ChangePoint struct {
	Index     int  `json:"index"`
	Confirmed bool `json:"confirmed"` // re-run and believed
}

// Progress is the pgbench -P output of one run: throughput per interval.
type Progress struct {
	Side     string    `json:"side"` // "good" or "bad"
	Commit   string    `json:"commit"`
	Run      int       `json:"run"`
	Interval float64   `json:"interval"` // seconds between values
	TPS      []float64 `json:"tps"`
}

// FollowUp names an earlier culprit whose issue a finding comments on.
type FollowUp struct {
	FindingID string `json:"finding_id,omitempty"`
	Branch    string `json:"branch"`
	Culprit   Commit `json:"culprit"`
}

// Environment is the machine the numbers come from.
type Environment struct {
	Host       string  `json:"host,omitempty"`
	OS         string  `json:"os,omitempty"`
	Kernel     string  `json:"kernel,omitempty"`
	CPU        string  `json:"cpu,omitempty"`
	Cores      int     `json:"cores,omitempty"`
	MemoryMB   int64   `json:"memory_mb,omitempty"`
	Governor   string  `json:"governor,omitempty"`
	Filesystem string  `json:"filesystem,omitempty"` // of the data directory
	LoadAvg    float64 `json:"load_avg,omitempty"`   // 1-minute, at start
	// Extra holds anything else worth recording (turbo, THP, virt).
	Extra map[string]string `json:"extra,omitempty"`
}

// BuildInfo is how PostgreSQL was built.
type BuildInfo struct {
	System       string   `json:"system,omitempty"` // "autoconf" or "meson"
	Configure    []string `json:"configure,omitempty"`
	CFLAGS       string   `json:"cflags,omitempty"`
	MesonOptions []string `json:"meson_options,omitempty"`
	Compiler     string   `json:"compiler,omitempty"`
	// Key is the build cache key of these options.
	Key string `json:"key,omitempty"`
	// ClientBin is the directory of the pgbench/psql used for every run.
	ClientBin string `json:"client_bin,omitempty"`
}

// Duration is how long the work took.
func (f *Finding) Duration() time.Duration {
	if f.Started.IsZero() || f.Finished.Before(f.Started) {
		return 0
	}
	return f.Finished.Sub(f.Started)
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// NewID returns an ID for a finding started at t about scenario and commit
// (the bad commit or the culprit): "20260130T021500Z-copy-single-9f8377f7a2".
func NewID(t time.Time, scenario, commit string) string {
	clean := func(s string) string {
		s = strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
				return r
			}
			return '-'
		}, s)
		return strings.Trim(s, "-.")
	}
	id := t.UTC().Format("20060102T150405Z")
	if s := clean(scenario); s != "" {
		id += "-" + s
	}
	if len(commit) > 10 {
		commit = commit[:10]
	}
	if c := clean(commit); c != "" {
		id += "-" + c
	}
	return id
}

// Validate checks what every renderer and the poster rely on.
func (f *Finding) Validate() error {
	if !idRE.MatchString(f.ID) {
		return fmt.Errorf("finding id %q must be 1-128 letters, digits, '.', '_' or '-' (see finding.NewID)", f.ID)
	}
	if f.Version > FormatVersion {
		return fmt.Errorf("finding %s has format version %d; this pgbisect reads up to %d: upgrade pgbisect", f.ID, f.Version, FormatVersion)
	}
	known := false
	for _, k := range kinds {
		known = known || f.Kind == k
	}
	if !known {
		return fmt.Errorf("finding %s: unknown kind %q (want one of %v)", f.ID, f.Kind, kinds)
	}
	if f.Kind == Regression && len(f.Culprits) == 0 {
		return fmt.Errorf("finding %s: a regression needs at least one culprit", f.ID)
	}
	for i, c := range f.Culprits {
		if c.Commit.Hash == "" {
			return fmt.Errorf("finding %s: culprit %d has no commit hash", f.ID, i+1)
		}
	}
	return nil
}

// Marshal returns f in the JSON report format: indented, stable field
// order, Version set.
func Marshal(f *Finding) ([]byte, error) {
	g := finiteCopy(f)
	if g.Version == 0 {
		g.Version = FormatVersion
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&g); err != nil {
		return nil, fmt.Errorf("encoding finding %s: %w", f.ID, err)
	}
	return b.Bytes(), nil
}

// finiteCopy returns a copy of f whose floats are all finite: JSON has no
// NaN, and a NaN that stats leaves for a non-positive median must not make a
// finding impossible to save. Non-finite values become 0 ("?" in reports).
func finiteCopy(f *Finding) Finding {
	g := *f
	cmps := func(cs []Comparison) []Comparison {
		out := slices.Clone(cs)
		for i := range out {
			c := &out[i]
			for _, x := range []*float64{&c.Good.Median, &c.Good.RelStddev, &c.Bad.Median, &c.Bad.RelStddev,
				&c.Ratio, &c.RatioLow, &c.RatioHigh, &c.Confidence, &c.P} {
				*x = stats.Finite(*x)
			}
			c.Change = 0
			if c.Ratio != 0 {
				c.Change = math.Round((c.Ratio-1)*1e6) / 1e6
			}
		}
		return out
	}
	floats := func(xs []float64) []float64 {
		out := slices.Clone(xs)
		for i := range out {
			out[i] = stats.Finite(out[i])
		}
		return out
	}
	g.Comparisons = cmps(f.Comparisons)
	g.Culprits = slices.Clone(f.Culprits)
	for i := range g.Culprits {
		g.Culprits[i].Comparisons = cmps(g.Culprits[i].Comparisons)
	}
	g.Reverts = finiteReverts(f.Reverts, cmps)
	g.Log = slices.Clone(f.Log)
	for i := range g.Log {
		g.Log[i].Median = stats.Finite(g.Log[i].Median)
		g.Log[i].Samples = floats(g.Log[i].Samples)
	}
	if f.Series != nil {
		s := *f.Series
		s.Points = slices.Clone(s.Points)
		for i := range s.Points {
			s.Points[i].Median = stats.Finite(s.Points[i].Median)
		}
		g.Series = &s
	}
	g.Progress = slices.Clone(f.Progress)
	for i := range g.Progress {
		g.Progress[i].TPS = floats(g.Progress[i].TPS)
		g.Progress[i].Interval = stats.Finite(g.Progress[i].Interval)
	}
	g.Env.LoadAvg = stats.Finite(g.Env.LoadAvg)
	return g
}

// Unmarshal reads a finding in the JSON report format, rejecting unknown
// fields so a typo in a hand-edited file is not silently ignored.
func Unmarshal(data []byte) (*Finding, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f Finding
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decoding finding: %w", err)
	}
	if f.Version == 0 {
		f.Version = FormatVersion
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// ReadFile reads a finding from a JSON file.
func ReadFile(path string) (*Finding, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading finding: %w", err)
	}
	f, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
