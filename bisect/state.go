// Package bisect finds the commit(s) in a range that made a benchmark
// slower, with evidence: every verdict comes from a statistical comparison
// of interleaved samples, and every culprit is re-measured against its
// parent with fresh samples before it is blamed.
//
// The design choice that matters: the whole search lives in one State
// value, and the next step is a pure function of it. The engine (Run)
// only performs the I/O that step asks for (build a commit, take one
// sample) and saves the State after every result, so an interrupted
// bisection resumes exactly where it stopped with no sample lost or
// repeated, and the search can be simulated without builds or servers.
package bisect

import (
	"fmt"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// StateVersion is the version of the State encoding. Load refuses states
// written with another version.
const StateVersion = 1

// State is the whole search: its inputs, the commits of the range, every
// sample taken, every verdict reached, the culprits found and a log of
// what happened. It is saved as JSON after every sample.
type State struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Inputs  Inputs `json:"inputs"`

	// Commits is the range, oldest first: Commits[0] is the good commit,
	// the last one the bad commit.
	Commits []Commit `json:"commits"`

	// Builds records, per build key, whether the key was built and whether
	// it failed. A key is built once; its result is reused by every commit
	// sharing it.
	Builds map[string]*BuildResult `json:"builds"`

	// Samples holds every measurement of the chosen metric, per build
	// key, in the order taken. A search comparison involving a key uses
	// those young enough when it starts (see Window).
	Samples map[string][]float64 `json:"samples"`
	// SampleSeq holds, for each sample in Samples, when it was taken on
	// the bisection's clock: the value of SamplesTaken just before it.
	// States saved before sample times were kept have none.
	SampleSeq map[string][]int `json:"sample_seq,omitempty"`
	// Window limits the reuse of samples in search comparisons: a
	// comparison uses the samples of its sides that are younger than
	// Window samples (of the whole bisection) when it starts; 1 takes
	// only samples taken since it started (DefaultWindow). A machine's
	// speed drifts over hours, so a commit measured long ago cannot be
	// compared with one measured now. 0 reuses every sample however old,
	// as states saved before windows existed did.
	Window int `json:"window,omitempty"`
	// OrderSeed chooses which side starts each A B B A block of every
	// comparison (see nextSide), so that side A, the older commit, does
	// not always run first. New states derive it from the ID; 0, as in
	// states saved before it existed, starts every block at side A.
	OrderSeed uint64 `json:"order_seed,omitempty"`
	// Hints are commits (indexes into Commits) a profile of the endpoints
	// points at: they touch the files of the functions whose CPU share
	// grew. The search splits so as to isolate them first (hintSplit).
	// Empty: plain bisection. Set from Guide in a profile-guided
	// bisection, directly by the simulation (docs/bisect.md,
	// "Profile-guided search").
	Hints []int `json:"hints,omitempty"`
	// Guide is what a profile of the endpoints pointed at, in a
	// profile-guided bisection; nil otherwise.
	Guide *Guide `json:"guide,omitempty"`

	// Plan is the version of the search's rules the bisection follows
	// (see CurrentPlan). States saved before plans existed have 0 and
	// continue with the rules they began with.
	Plan int `json:"plan,omitempty"`
	// Exhaustive turns off, from Plan 3, the stop when the culprits
	// explain the change (see explain.go): every range beside a culprit
	// is judged. Set by 'pgbisect bisect --exhaustive'; it can be set
	// when the bisection is resumed, not cleared.
	Exhaustive bool `json:"exhaustive,omitempty"`
	// Explained is set when the search stopped because its suspects
	// explained the endpoints' change, with the evidence.
	Explained *Explanation `json:"explained,omitempty"`

	// Machine is the machine taking the samples now, Moves the moves from
	// one machine to another, and MachineFrom the index in Samples, per
	// key, of the first sample taken on Machine: the samples of one
	// comparison come from one machine (see Arrive, machine.go). Empty in
	// states saved before machines were kept and in runs outside a daemon.
	Machine     string         `json:"machine,omitempty"`
	Moves       []Move         `json:"moves,omitempty"`
	MachineFrom map[string]int `json:"machine_from,omitempty"`
	// Clock is, in a search of a bisection of several points, the
	// bisection's clock (its SamplesTaken) at each of this search's
	// samples, in order: how a move finds their place among the samples
	// stored (see Move.Seqs).
	Clock []int `json:"clock,omitempty"`

	// Phase is where the search is.
	Phase Phase `json:"phase"`

	// Points are the indices into Commits chosen for measurement, in
	// order. Adjacent points form the pairs being judged.
	Points []int `json:"points"`

	// Pairs are the comparisons of the search, in the order they were
	// started. The pair of two adjacent points is the last one listed
	// for them.
	Pairs []Pair `json:"pairs"`

	// Checks are the re-verifications of suspected culprits against their
	// parents, with fresh samples that no search comparison has seen.
	Checks []Check `json:"checks"`

	// Culprits are the confirmed culprits, largest effect first, set when
	// the search is done.
	Culprits []Culprit `json:"culprits,omitempty"`
	// Unresolved are ranges known to hold part of the regression where the
	// budget did not allow to narrow it further, set when the search is
	// done.
	Unresolved []Range `json:"unresolved,omitempty"`
	// Unconfirmed are suspects whose re-verification did not show a
	// regression: reported, never blamed.
	Unconfirmed []Range `json:"unconfirmed,omitempty"`
	// Unjudged are ranges beside a regression that a bisection stopped at
	// its time bound left unjudged: they may hold another regression.
	Unjudged []Range `json:"unjudged,omitempty"`

	// MaxTime bounds the bisection's Spent time; 0: no bound. At the bound
	// the planner stops with what it has (OutcomeTimeBound, budget.go).
	// It is no input: it can be raised when the bisection is resumed.
	MaxTime time.Duration `json:"max_time,omitempty"`
	// Spent is the wall time the engine has worked on the bisection
	// (builds, samples, saves), summed over every run of it, so that a
	// resumed bisection keeps counting; time between runs is not spent.
	Spent time.Duration `json:"spent,omitempty"`
	// StoppedIn is the phase a bisection stopped at its time bound was
	// in, where it continues when the bound is raised.
	StoppedIn Phase `json:"stopped_in,omitempty"`

	// Outcome is set when Phase is PhaseDone.
	Outcome Outcome `json:"outcome,omitempty"`
	// Summary says the outcome in one sentence, with numbers.
	Summary string `json:"summary,omitempty"`

	// Curve holds the searches of a bisection of several points (see
	// curve.go); nil for a bisection of one point, whose search is this
	// State itself.
	Curve *Curve `json:"curve,omitempty"`

	// Events is the log of the bisection, oldest first.
	Events []Event `json:"events"`

	// Counts and timings.
	BuildsDone   int           `json:"builds_done"`   // keys built (or found broken) by this bisection
	SamplesTaken int           `json:"samples_taken"` // samples taken, search and checks
	Started      time.Time     `json:"started"`
	Updated      time.Time     `json:"updated"`
	BuildTime    time.Duration `json:"build_time"`   // total time spent building
	MeasureTime  time.Duration `json:"measure_time"` // total time spent sampling
}

// Inputs are what the user asked for. They determine the ID.
type Inputs struct {
	Repo      string          `json:"repo"`
	Good      string          `json:"good"` // full hash
	Bad       string          `json:"bad"`  // full hash
	Scenario  string          `json:"scenario"`
	Metric    string          `json:"metric"`
	Unit      string          `json:"unit,omitempty"`
	Direction stats.Direction `json:"direction"`
	Point     string          `json:"point,omitempty"` // e.g. "clients=1"
	// Points are the matrix points of a bisection of several points (a
	// curve, see Curve), in the scenario's order; empty for one point.
	Points []string `json:"points,omitempty"`
	// Set holds the scenario variables the user overrode (--set).
	Set         map[string]string `json:"set,omitempty"`
	FirstParent bool              `json:"first_parent"`
	// Thresholds rule every search comparison. Checks use the same ones
	// with a smaller alpha (see CheckAlpha).
	Thresholds stats.Thresholds `json:"thresholds"`
	// WrongBlame is the bound on the probability of blaming any commit
	// that did not cause a regression. Default: 0.01.
	WrongBlame float64 `json:"wrong_blame"`
	// GivenGood is the good commit the user gave when it was not an
	// ancestor of Bad; Good is then their merge base. Empty otherwise.
	GivenGood string `json:"given_good,omitempty"`
}

// Commit is one commit of the range.
type Commit struct {
	Hash        string    `json:"hash"`
	Subject     string    `json:"subject"`
	Author      string    `json:"author,omitempty"`
	AuthorEmail string    `json:"author_email,omitempty"`
	Date        time.Time `json:"date"`
	// Key is the build key: commits with equal keys produce the same server.
	Key string `json:"key"`
	// NoCompile is set when the commit has the same key as its parent
	// (documentation, test files): it can be no culprit and is never built.
	NoCompile bool `json:"no_compile,omitempty"`
}

// Short returns the abbreviated hash.
func (c Commit) Short() string {
	if len(c.Hash) > 10 {
		return c.Hash[:10]
	}
	return c.Hash
}

// BuildResult is the outcome of building one key, and of measuring it
// when that failed.
type BuildResult struct {
	Hash   string `json:"hash"` // the commit built for the key
	Broken bool   `json:"broken,omitempty"`
	// Unmeasurable is set when the key builds but a sample on it failed
	// (initdb, start, a crash, a workload error the build causes). Like a
	// broken key it is skipped, never measured again and never blamed.
	Unmeasurable bool   `json:"unmeasurable,omitempty"`
	Reason       string `json:"reason,omitempty"` // why it is broken or unmeasurable
	// LogPath is the build log of a broken key, the server log of an
	// unmeasurable one.
	LogPath string `json:"log_path,omitempty"`
	// ServerLog is the tail of the server log of an unmeasurable key.
	ServerLog string        `json:"server_log,omitempty"`
	Duration  time.Duration `json:"duration"`
}

// Phase is a stage of the search.
type Phase string

const (
	PhaseEndpoints Phase = "endpoints" // is bad measurably worse than good?
	PhaseSearch    Phase = "search"    // split pairs judged different
	PhaseCheck     Phase = "check"     // re-verify suspects with fresh samples
	PhaseDone      Phase = "done"
)

// Outcome is how a bisection ended.
type Outcome string

const (
	// OutcomeFound: at least one culprit (or culprit range) confirmed.
	OutcomeFound Outcome = "found"
	// OutcomeNoRegression: bad is shown to be within the minimum effect of
	// good (the endpoint comparison's verdict is "same").
	OutcomeNoRegression Outcome = "no-regression"
	// OutcomeNotShown: the endpoint comparison ran out of budget without
	// showing either a regression or that there is none; more samples or
	// a larger workload may decide it.
	OutcomeNotShown Outcome = "not-shown"
	// OutcomeImprovement: bad is measurably better than good.
	OutcomeImprovement Outcome = "improvement"
	// OutcomeUnresolved: the endpoints differ, but no culprit survived the
	// search and its checks; the report lists the ranges left.
	OutcomeUnresolved Outcome = "unresolved"
	// OutcomeBroken: an endpoint does not build, or builds but cannot be
	// measured while the other endpoint can.
	OutcomeBroken Outcome = "broken-endpoint"
	// OutcomeTimeBound: the bisection stopped at its time bound
	// (State.MaxTime) with a partial answer: the culprits confirmed
	// before it, the ranges narrowed so far (Unresolved), and the
	// verdicts made. Raising the bound resumes it.
	OutcomeTimeBound Outcome = "time-bound"
)

// Verdict is a judgement of one comparison (a copy of stats.Verdict as a
// word, so states stay readable).
type Verdict string

const (
	VerdictPending      Verdict = ""
	VerdictSame         Verdict = "same"
	VerdictRegression   Verdict = "regression"
	VerdictImprovement  Verdict = "improvement"
	VerdictInconclusive Verdict = "inconclusive"
	// VerdictUnmeasurable: a check whose side became unmeasurable; it
	// blames nothing.
	VerdictUnmeasurable Verdict = "unmeasurable"
	// VerdictSmaller: the older half of a split whose change is shown
	// smaller than the regression of the pair it was split from (Plan 1),
	// so that regression lies in the newer half. The half may still hold
	// a smaller regression of its own: it is deferred (see Pair.Deferred)
	// and judged again, merged with its neighbours, at the end. A merged
	// pair is judged smaller once the upper end of its interval is below
	// the minimum effect: it holds no regression worth a search.
	VerdictSmaller Verdict = "smaller"
)

// Pair is the comparison of two points of the search, Left older than
// Right (indices into State.Commits).
type Pair struct {
	Left  int `json:"left"`
	Right int `json:"right"`
	// Target is the number of samples per side to have before the next
	// comparison.
	Target int `json:"target"`
	// From is when the pair's comparison started, on the clock of
	// SampleSeq (see State.Window).
	From    int     `json:"from,omitempty"`
	Verdict Verdict `json:"verdict"`
	// Result is the comparison that gave the verdict.
	Result *Result `json:"result,omitempty"`
	// Parent is the index in State.Pairs of the pair this one was split
	// from, -1 for the endpoints.
	Parent int `json:"parent"`
	// Forced is set when neither half of a regression was judged a
	// regression within the budget and this half, the one that got worse,
	// was chosen to follow. A forced pair is searched like a regression,
	// but only a check with fresh samples can make a culprit of it.
	Forced bool `json:"forced,omitempty"`
	// Taken counts the samples taken for this comparison (both sides), so
	// that a bisection can say where its samples went (see Spend). States
	// saved before it was kept have none.
	Taken int `json:"taken,omitempty"`
	// Inferred is set on the newer half of a split whose older half was
	// judged the same: the pair regressed, so the newer half holds the
	// regression, and it is followed without a comparison of its own
	// (Plan 1). Like a forced pair, only a check can make a culprit of it.
	Inferred bool `json:"inferred,omitempty"`
	// Deferred is set on the newer half of a split whose older half was
	// judged a regression (Plan 1). It may hold another culprit, so it
	// must be judged, but not on its own: once the search has nothing else
	// to do, each run of adjacent deferred pairs is judged as one pair (a
	// merged pair, Merged), and split again only if that regressed.
	Deferred bool `json:"deferred,omitempty"`
	// Merged is set on a pair made of a run of deferred pairs.
	Merged bool `json:"merged,omitempty"`
	// Dropped is set when a point inside or at the end of the pair turned
	// out to be unmeasurable: the pair is forgotten, and the pair it was
	// split from is split again elsewhere (see MarkUnmeasurable).
	Dropped bool `json:"dropped,omitempty"`
	// Unexplained is set on a followed pair (Plan 3) neither of whose
	// halves is a regression and whose halves together change it by less
	// than the minimum effect: no half is forced, and the pair is left as
	// an unresolved range (see halvesExplain).
	Unexplained bool `json:"unexplained,omitempty"`
}

// Check re-verifies a suspect: the commits Right back to Left+1 hold a
// regression, judged with Left and Right's fresh samples only.
type Check struct {
	Left   int       `json:"left"`
	Right  int       `json:"right"`
	A      []float64 `json:"a"` // fresh samples of Left's key
	B      []float64 `json:"b"` // fresh samples of Right's key
	Target int       `json:"target"`
	// Alpha is the significance level of this check (CheckAlpha).
	Alpha   float64 `json:"alpha"`
	Verdict Verdict `json:"verdict"`
	Result  *Result `json:"result,omitempty"`
	// Curve is set on a check that measures, at one point of a curve, a
	// culprit found at another point, so that the report can show the
	// whole curve before and after it (see Curve). It blames nothing.
	Curve bool `json:"curve,omitempty"`
}

// Result is the evidence of one comparison, from stats.Compare.
type Result struct {
	MedianA float64 `json:"median_a"`
	MedianB float64 `json:"median_b"`
	RelA    float64 `json:"rel_a"` // relative stddev of A, a fraction
	RelB    float64 `json:"rel_b"`
	NA      int     `json:"n_a"`
	NB      int     `json:"n_b"`
	Ratio   float64 `json:"ratio"` // median B / median A
	Lo      float64 `json:"lo"`    // confidence interval of Ratio
	Hi      float64 `json:"hi"`
	P       float64 `json:"p"`
	// Worse is how much worse B is than A in the metric's direction
	// (+0.10 = 10% worse); culprits are ranked by it.
	Worse    float64  `json:"worse"`
	Warnings []string `json:"warnings,omitempty"`
}

// Change is Ratio-1 as a signed fraction (+0.10 is 10% larger).
func (r *Result) Change() float64 { return r.Ratio - 1 }

// Range is a run of commits (indices into State.Commits, inclusive) that
// holds a change; Parent is the measured commit just before it.
type Range struct {
	Parent int     `json:"parent"`
	First  int     `json:"first"`
	Last   int     `json:"last"`
	Result *Result `json:"result,omitempty"`
	Note   string  `json:"note,omitempty"`
}

// Culprit is a confirmed culprit: a single commit, or a range of candidates
// when skipped commits (that do not build or cannot be measured) border it.
type Culprit struct {
	Range
	// Candidates are the commits that may hold the change (indices into
	// State.Commits): one when the culprit is known exactly.
	Candidates []int `json:"candidates"`
	// Search is the comparison that located it; Range.Result is the
	// fresh re-verification that confirmed it.
	Search *Result `json:"search,omitempty"`
}

// Exact reports whether the culprit is a single commit.
func (c Culprit) Exact() bool { return len(c.Candidates) == 1 }

// Event is one line of the bisection log.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // build, broken, unmeasurable, verdict, split, check, culprit, outcome, resume
	Commit  string    `json:"commit,omitempty"`
	Message string    `json:"message"`
	// Point is, in a bisection of several points, the point of the search
	// the event came from (its Message starts with "[POINT] " too, for
	// the log); empty for the bisection's own events.
	Point string `json:"point,omitempty"`
}

// DefaultThresholds rule the search's comparisons when Inputs.Thresholds
// is zero. They differ from stats.DefaultThresholds on purpose: a wrong
// "different" in the search only costs builds and samples (no culprit is
// blamed without a check), while a missed one loses a culprit, so the
// search tests at alpha 0.05 with a budget of 60 samples per side; checks
// test at Inputs.WrongBlame (0.01) split over the suspects, with twice the
// budget (CheckBudget). MinEffect is 5%: smaller changes are not worth
// blaming a commit for under 10% noise.
var DefaultThresholds = stats.Thresholds{Alpha: 0.05, MinEffect: 0.05, MaxSamples: 60}.WithDefaults()

// NewState starts a bisection of commits (oldest first, good first and bad
// last, with their build keys filled in) for the given inputs. Zero
// thresholds and bounds take their defaults.
func NewState(in Inputs, commits []Commit, now time.Time) (*State, error) {
	if len(commits) < 2 {
		return nil, fmt.Errorf("a bisection needs the good and the bad commit, got %d commits", len(commits))
	}
	for i, c := range commits {
		if c.Key == "" {
			return nil, fmt.Errorf("commit %s has no build key", c.Short())
		}
		if i > 0 && c.NoCompile && c.Key != commits[i-1].Key {
			return nil, fmt.Errorf("commit %s is marked no-compile but its key differs from its parent's", c.Short())
		}
	}
	if in.WrongBlame == 0 {
		in.WrongBlame = 0.01
	}
	if in.Thresholds == (stats.Thresholds{}) {
		in.Thresholds = DefaultThresholds
	}
	in.Thresholds = in.Thresholds.WithDefaults()
	n := len(commits)
	s := &State{
		Version:   StateVersion,
		ID:        ID(in),
		Inputs:    in,
		Commits:   commits,
		Builds:    map[string]*BuildResult{},
		Samples:   map[string][]float64{},
		SampleSeq: map[string][]int{},
		Window:    DefaultWindow,
		OrderSeed: stats.SeedOf(ID(in)),
		Plan:      CurrentPlan,
		Phase:     PhaseEndpoints,
		Points:    []int{0, n - 1},
		Pairs:     []Pair{{Left: 0, Right: n - 1, Parent: -1}},
		Started:   now,
		Updated:   now,
	}
	s.logf(now, "start", "", "bisecting %d commits %s..%s (%d can be culprits) on %s", n, commits[0].Short(), commits[n-1].Short(), s.CandidateCount(), in.Metric)
	return s, nil
}

// CandidateCount is the number of commits that can be culprits: every
// commit after the good one that changes what is compiled.
func (s *State) CandidateCount() int {
	n := 0
	for _, c := range s.Commits[1:] {
		if !c.NoCompile {
			n++
		}
	}
	return n
}

// Done reports whether the bisection is finished.
func (s *State) Done() bool { return s.Phase == PhaseDone }

func (s *State) logf(now time.Time, kind, commit, format string, args ...any) {
	s.Events = append(s.Events, Event{Time: now, Kind: kind, Commit: commit, Message: fmt.Sprintf(format, args...)})
}

// Skipped reports whether commit i is known not to build or not to be
// measurable.
func (s *State) Skipped(i int) bool {
	b := s.Builds[s.Commits[i].Key]
	return b != nil && (b.Broken || b.Unmeasurable)
}
