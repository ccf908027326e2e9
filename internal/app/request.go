package app

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// A Request is one operation as asked for: a typed value that survives a
// round trip through JSON, so it can wait in a queue, come from a web form
// or a GitHub comment, and run in another process.
type Request interface {
	// Kind names the operation (kinds.go lists them: "bisect",
	// "compare", "run", "nightly", "deliver").
	Kind() string
}

// BisectRequest asks for every culprit of a regression between two
// revisions.
type BisectRequest struct {
	Scenario string            `json:"scenario,omitempty"` // scenario file
	Set      map[string]string `json:"set,omitempty"`      // scenario variable overrides
	Good     string            `json:"good,omitempty"`
	Bad      string            `json:"bad,omitempty"`
	Metric   string            `json:"metric,omitempty"` // "": the scenario's first metric
	Point    string            `json:"point,omitempty"`  // "": the only point; a list ("clients=1;clients=4") or "all": one bisection of several points
	// FirstParent follows only first parents.
	FirstParent bool `json:"first_parent,omitempty"`
	// ReuseSamples lets search comparisons reuse every earlier sample of
	// a commit (bisect.State.Window 0) instead of only fresh ones.
	ReuseSamples bool `json:"reuse_samples,omitempty"`
	// Exhaustive judges every range beside the culprits instead of
	// stopping once they explain the endpoints' change
	// (bisect.State.Exhaustive). On a resume it turns the stop off for
	// the rest of the search.
	Exhaustive bool `json:"exhaustive,omitempty"`
	// Alpha, MinEffect and MaxSamples override the scenario's stats
	// section, which overrides the App's (0: not given).
	Alpha      float64 `json:"alpha,omitempty"`
	MinEffect  float64 `json:"min_effect,omitempty"`
	MaxSamples int     `json:"max_samples,omitempty"`
	// MaxTime bounds the whole bisection's time (bisect.State.MaxTime);
	// 0: no bound, or, on a resume, the bound it had. Given on a resume
	// it replaces the bound: a bisection stopped at its bound continues
	// when the new one is longer than the time it spent.
	MaxTime time.Duration `json:"max_time,omitempty"`
	// Resume is a bisection ID to resume instead; its inputs are in the
	// results store.
	Resume string `json:"resume,omitempty"`
	// ClientBin is the directory of pgbench and psql for every run; "":
	// the App's, else the good commit's build.
	ClientBin string `json:"client_bin,omitempty"`
	// KeepClusters keeps cluster directories.
	KeepClusters bool `json:"keep_clusters,omitempty"`
	// NoRevertCheck skips the revert check of the culprits (revert.go).
	NoRevertCheck bool `json:"no_revert_check,omitempty"`
	// ProfileRuns is the profiled runs each side of a confirmed culprit
	// gets for "where the time went" (bisectprofile.go); 0 profiles
	// nothing, nil takes DefaultProfileRuns.
	ProfileRuns *int `json:"profile_runs,omitempty"`
	// ProfileFramePointers profiles builds made with frame pointers
	// instead of the bisection's own.
	ProfileFramePointers bool `json:"profile_frame_pointers,omitempty"`
	// ProfileGuided makes a new bisection profile its endpoints once they
	// differ and try first the commits that touch the files of the
	// functions whose CPU share grew (bisectguide.go); nil takes
	// DefaultProfileGuided. A resumed bisection keeps what it began with.
	ProfileGuided *bool `json:"profile_guided,omitempty"`
	// Post posts the finding to GitHub when the bisection ends; without
	// it the finding is kept, not queued for posting.
	Post bool `json:"post,omitempty"`
	// Requester is who asked (user@host, a GitHub login), for status.
	Requester string `json:"requester,omitempty"`

	// thresholds, when set (a nightly regression's), are used as they are
	// but for MinEffect; report leaves recording the finding to the caller.
	thresholds stats.Thresholds
	report     bool
}

// Kind implements Request.
func (BisectRequest) Kind() string { return "bisect" }

// profileGuided says whether a new bisection of r is profile-guided.
func (r BisectRequest) profileGuided() bool {
	if r.ProfileGuided != nil {
		return *r.ProfileGuided
	}
	return DefaultProfileGuided
}

// Args are the request as the flags of 'pgbisect bisect' (for status, job
// logs and reproducing it by hand).
func (r BisectRequest) Args() []string {
	var a []string
	add := func(flag, v string) {
		if v != "" {
			a = append(a, flag, v)
		}
	}
	if r.Resume != "" {
		a = append(a, "--resume", r.Resume)
	}
	add("--scenario", r.Scenario)
	add("--good", r.Good)
	add("--bad", r.Bad)
	add("--metric", r.Metric)
	add("--point", r.Point)
	if r.FirstParent {
		a = append(a, "--first-parent")
	}
	if r.ReuseSamples {
		a = append(a, "--reuse-samples")
	}
	if r.Exhaustive {
		a = append(a, "--exhaustive")
	}
	if r.Alpha != 0 {
		a = append(a, "--alpha", fmt.Sprint(r.Alpha))
	}
	if r.MinEffect != 0 {
		a = append(a, "--min-effect", fmt.Sprint(r.MinEffect))
	}
	if r.MaxSamples != 0 {
		a = append(a, "--max-samples", fmt.Sprint(r.MaxSamples))
	}
	if r.MaxTime != 0 {
		a = append(a, "--max-time", r.MaxTime.String())
	}
	a = append(a, setFlags(r.Set)...)
	add("--client-bin", r.ClientBin)
	if r.KeepClusters {
		a = append(a, "--keep-clusters")
	}
	if r.NoRevertCheck {
		a = append(a, "--no-revert-check")
	}
	if r.ProfileRuns != nil {
		a = append(a, "--profile-runs", fmt.Sprint(*r.ProfileRuns))
	}
	if r.ProfileFramePointers {
		a = append(a, "--profile-frame-pointers")
	}
	if r.ProfileGuided != nil {
		a = append(a, fmt.Sprintf("--profile-guided=%t", *r.ProfileGuided))
	}
	if r.Post {
		a = append(a, "--post")
	}
	return a
}

// setFlags are scenario variables as --set flags, sorted.
func setFlags(set map[string]string) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var a []string
	for _, k := range keys {
		a = append(a, "--set", k+"="+set[k])
	}
	return a
}

// Validate checks what can be checked without the repository.
func (r BisectRequest) Validate() error {
	if r.Resume == "" && (r.Scenario == "" || r.Good == "" || r.Bad == "") {
		return badRequest("give -s SCENARIO, --good REV and --bad REV (or --resume ID)")
	}
	if r.MinEffect < 0 || r.MinEffect >= 1 {
		return badRequest("--min-effect %g is out of range: it is a fraction, 0.05 means 5%%", r.MinEffect)
	}
	if r.Alpha < 0 || r.Alpha >= 0.5 {
		return badRequest("--alpha %g is out of range: use a small probability such as 0.01", r.Alpha)
	}
	if r.MaxSamples < 0 {
		return badRequest("--max-samples %d: give a number of samples per side, or 0 for the default", r.MaxSamples)
	}
	if r.MaxTime < 0 {
		return badRequest("--max-time %s is negative: give the longest the whole bisection may take, such as 8h", r.MaxTime)
	}
	if r.ProfileRuns != nil && *r.ProfileRuns < 0 {
		return badRequest("--profile-runs %d: give a number of runs, or 0 for no profiles", *r.ProfileRuns)
	}
	return nil
}

// CompareRequest asks for two builds to be measured interleaved, with
// adaptive sampling, and judged per metric.
type CompareRequest struct {
	Scenario string            `json:"scenario"`
	Set      map[string]string `json:"set,omitempty"`
	// A and B are revisions to build, or bin directories of installations.
	A string `json:"a"`
	B string `json:"b,omitempty"`
	// Patches are patch files (git diff, format-patch or an mbox) applied
	// in order on top of A to make B; B is then empty.
	Patches []string `json:"patches,omitempty"`
	// PatchData are patches carried in the request itself, applied after
	// Patches: a queued job runs on another machine, where the requester's
	// file paths mean nothing ('pgbisect request compare --patch', a patch
	// fetched for a GitHub comment).
	PatchData []PatchData `json:"patch_data,omitempty"`
	Point     string      `json:"point,omitempty"` // "": every point
	// ClientBin is the pgbench and psql of both sides; "": the App's,
	// else A's.
	ClientBin string `json:"client_bin,omitempty"`
	// Alpha, MinEffect, MaxSamples and MaxTime override the scenario's
	// stats section (0: not given).
	Alpha        float64       `json:"alpha,omitempty"`
	MinEffect    float64       `json:"min_effect,omitempty"`
	MaxSamples   int           `json:"max_samples,omitempty"`
	MaxTime      time.Duration `json:"max_time,omitempty"`
	KeepClusters bool          `json:"keep_clusters,omitempty"`
	// OrderSeed seeds the order of samples; 0: a random one, reported.
	OrderSeed uint64 `json:"order_seed,omitempty"`
	// Profile profiles both sides with perf after the verdict,
	// ProfileRuns samples per side; FlameGraph is where to write the
	// differential flame graph ("" none).
	Profile     bool   `json:"profile,omitempty"`
	ProfileRuns int    `json:"profile_runs,omitempty"`
	FlameGraph  string `json:"flame_graph,omitempty"`
}

// Kind implements Request.
func (CompareRequest) Kind() string { return "compare" }

// PatchData is one patch carried in a request: what a patch file holds
// (git diff, format-patch or an mbox) and a name for errors and reports.
type PatchData struct {
	Name string `json:"name"`
	// Data is the patch (base64 in JSON, so any bytes survive).
	Data []byte `json:"data"`
}

// MaxRequestPatchBytes caps the patches one queued request carries: they
// travel in the job's arguments, a row of the results database.
const MaxRequestPatchBytes = 4 << 20

// checkPatches refuses patches a queued request cannot carry.
func (r CompareRequest) checkPatches() error {
	if r.B != "" && (len(r.Patches) > 0 || len(r.PatchData) > 0) {
		return badRequest("compare: give B or patches, not both: the patches are applied on top of A to make B")
	}
	n := 0
	for _, p := range r.PatchData {
		if len(p.Data) == 0 {
			return badRequest("compare: patch %q is empty", p.Name)
		}
		n += len(p.Data)
	}
	if n > MaxRequestPatchBytes {
		return badRequest("compare: the patches are %d KiB, more than a request carries (%d KiB)", n>>10, MaxRequestPatchBytes>>10)
	}
	return nil
}

// RunRequest asks for one build to be measured.
type RunRequest struct {
	Scenario string            `json:"scenario"`
	Set      map[string]string `json:"set,omitempty"`
	// Rev is a revision to build; BinDir an installation to measure
	// instead.
	Rev          string `json:"rev,omitempty"`
	BinDir       string `json:"bindir,omitempty"`
	Samples      int    `json:"samples"`         // per matrix point
	Point        string `json:"point,omitempty"` // "": every point
	ClientBin    string `json:"client_bin,omitempty"`
	KeepClusters bool   `json:"keep_clusters,omitempty"`
	// CPUs replaces the scenario's cpus: section: "server=LIST,client=LIST"
	// or "off" (bench.ParseCPUSpec); "": the scenario's.
	CPUs string `json:"cpus,omitempty"`
}

// Kind implements Request.
func (RunRequest) Kind() string { return "run" }

// NightlyRequest asks for one nightly pass over the App's branch and suite.
type NightlyRequest struct {
	// Force measures the head even when it has not moved.
	Force bool `json:"force,omitempty"`
	// Wait waits for the machine when another job uses it; otherwise the
	// pass is refused.
	Wait bool `json:"wait,omitempty"`
	// Deliver posts the pending findings afterwards (Deliver).
	Deliver bool `json:"deliver,omitempty"`
}

// Kind implements Request.
func (NightlyRequest) Kind() string { return "nightly" }

// DeliverRequest asks for the pending findings to be posted to GitHub.
type DeliverRequest struct{}

// Kind implements Request.
func (DeliverRequest) Kind() string { return "deliver" }

// ErrBadRequest marks an error in what was asked (a metric the scenario
// lacks, a revision that is not an ancestor): the command line exits 2 for
// it, a web form shows it next to the field.
var ErrBadRequest = errors.New("bad request")

type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Unwrap() error { return ErrBadRequest }

func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

// JobID is the events stream of queued job id (store.AppendEvent).
func JobID(id int64) string { return fmt.Sprintf("job-%d", id) }
