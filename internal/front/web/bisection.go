package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
)

// bisectionView is a stored bisection as its page shows it.
type bisectionView struct {
	ID       string
	Status   string
	State    *bisect.State
	Scenario string
	Commits  []commitRow // newest first, as git log lists them
	Pairs    []pairRow
	Chart    chartData
	// Stream is the event stream the page follows: the bisection's own
	// (a bisection run from the command line records its events under its
	// ID), or that of the queue job running it. Events are its stored
	// events so far; LastSeq is the last one's number, where the page's
	// live stream starts. Ended is set once the bisection is done: the
	// page then follows nothing.
	Stream  string
	Events  []eventView
	LastSeq int64
	Ended   bool
	// GoodHref and BadHref link the endpoints (see commitRow.Href).
	GoodHref, BadHref string
}

// commitRow is one commit of the range with what the search knows of it.
type commitRow struct {
	Index   int
	Commit  bisect.Commit
	Role    string // good, bad, culprit, candidate, broken, unmeasurable, no-compile, measured, untested
	N       int
	Median  float64
	Verdict string // of the pair this commit ends, when judged
	// Href links the commit: to Config.CommitURL, or to its page when the
	// store has samples of it ("" when it has none: a commit never
	// measured, or one measured as the build it shares with its parent).
	Href string
}

// pairRow is one comparison of the search.
type pairRow struct {
	Left, Right bisect.Commit
	Verdict     string
	Result      *bisect.Result
}

// chartData is the bisection plot: the median of every measured commit by
// its index in the range.
type chartData struct {
	Index   []int     `json:"index"`
	Commit  []string  `json:"commit"`
	Subject []string  `json:"subject"`
	Median  []float64 `json:"median"`
	Min     []float64 `json:"min"`
	Max     []float64 `json:"max"`
	N       []int     `json:"n"`
	// Culprits are indices of culprit candidates.
	Culprits []int  `json:"culprits"`
	Metric   string `json:"metric"`
}

// eventView is a stored job event as the page and the stream show it.
type eventView struct {
	Seq     int64           `json:"seq"`
	At      string          `json:"at"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
	// Text is a one-line summary of the payload.
	Text string `json:"text"`
}

func viewEvent(e store.Event) eventView {
	return eventView{Seq: e.Seq, At: e.At.UTC().Format("15:04:05"), Kind: e.Kind, Payload: e.Payload, Text: eventText(e.Payload)}
}

// eventText summarises a payload whose shape belongs to its producer: its
// "message" or "text" (internal/app's events) when it has one, else its
// scalar fields.
func eventText(payload json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(payload, &m) != nil {
		return string(payload)
	}
	for _, k := range []string{"message", "text"} { // a note's own line
		if msg, ok := m[k].(string); ok && msg != "" {
			return msg
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, k := range keys {
		switch v := m[k].(type) {
		case string, float64, bool:
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		case map[string]any:
			if h, ok := v["hash"].(string); ok {
				parts = append(parts, fmt.Sprintf("%s=%s", k, short(h)))
			}
		}
	}
	return strings.Join(parts, " ")
}

// pairVerdict is what the comparisons table says of p: its verdict, or
// why it has none. Only a bisection still running has pending pairs.
func pairVerdict(p bisect.Pair, done bool) string {
	switch {
	case p.Dropped:
		return "dropped (a commit in it could not be measured)"
	case p.Verdict != bisect.VerdictPending:
		return string(p.Verdict)
	case p.Inferred:
		return "regression, inferred (its older half was judged the same)"
	case p.Deferred && done:
		return "judged within a merged pair"
	case done:
		return "not needed"
	}
	return "pending"
}

// loadBisection reads bisection id and lays it out.
func (s *Server) loadBisection(ctx context.Context, id string) (*bisectionView, error) {
	st, err := s.st.LoadBisection(ctx, id)
	if err != nil {
		return nil, err
	}
	// The store's status column is the phase it saved.
	v := &bisectionView{ID: id, Status: string(st.Phase), State: st,
		Scenario: strings.TrimSuffix(filepath.Base(st.Inputs.Scenario), ".yaml")}
	role := map[int]string{}
	for _, c := range st.Culprits {
		for _, i := range c.Candidates {
			role[i] = "candidate"
			if c.Exact() {
				role[i] = "culprit"
			}
		}
	}
	verdict := map[int]string{}
	for _, p := range st.Pairs {
		if !p.Dropped && p.Verdict != bisect.VerdictPending {
			verdict[p.Right] = string(p.Verdict)
		}
		v.Pairs = append(v.Pairs, pairRow{Left: st.Commits[p.Left], Right: st.Commits[p.Right], Verdict: pairVerdict(p, st.Done()), Result: p.Result})
	}
	samples, err := s.st.Samples(ctx, store.SampleQuery{BisectionID: id, AnyPoint: true})
	if err != nil {
		return nil, err
	}
	measured := map[string]bool{}
	for _, sm := range samples {
		measured[sm.Commit] = true
	}
	v.GoodHref, v.BadHref = s.commitHref(st.Inputs.Good, measured[st.Inputs.Good]), s.commitHref(st.Inputs.Bad, measured[st.Inputs.Bad])
	v.Chart = chartData{Metric: st.Inputs.Metric, Culprits: []int{}}
	for i, c := range st.Commits {
		row := commitRow{Index: i, Commit: c, Role: role[i], Verdict: verdict[i], Href: s.commitHref(c.Hash, measured[c.Hash])}
		xs := slices.Sorted(slices.Values(st.Samples[c.Key]))
		if !c.NoCompile { // a no-compile commit shares its parent's samples
			row.N = len(xs)
		}
		if row.Role == "" {
			b := st.Builds[c.Key]
			switch {
			case i == 0:
				row.Role = "good"
			case i == len(st.Commits)-1:
				row.Role = "bad"
			case c.NoCompile:
				row.Role = "no-compile"
			case b != nil && b.Broken:
				row.Role = "broken"
			case b != nil && b.Unmeasurable:
				row.Role = "unmeasurable"
			case row.N > 0:
				row.Role = "measured"
			default:
				row.Role = "untested"
			}
		}
		if row.Role == "culprit" || row.Role == "candidate" {
			v.Chart.Culprits = append(v.Chart.Culprits, i)
		}
		if row.N > 0 {
			row.Median = quantile(xs, 0.5)
			v.Chart.Index = append(v.Chart.Index, i)
			v.Chart.Commit = append(v.Chart.Commit, c.Hash)
			v.Chart.Subject = append(v.Chart.Subject, c.Subject)
			v.Chart.Median = append(v.Chart.Median, row.Median)
			v.Chart.Min = append(v.Chart.Min, xs[0])
			v.Chart.Max = append(v.Chart.Max, xs[len(xs)-1])
			v.Chart.N = append(v.Chart.N, len(xs))
		}
		v.Commits = append(v.Commits, row)
	}
	slices.Reverse(v.Commits)
	v.Stream, v.Ended = id, st.Done()
	if !v.Ended {
		if v.Stream, err = s.streamOf(ctx, id); err != nil {
			return nil, err
		}
	}
	evs, err := s.st.Events(ctx, v.Stream, 0, 0)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		v.Events = append(v.Events, viewEvent(e))
		v.LastSeq = e.Seq
	}
	return v, nil
}

// streamOf is the event stream of bisection id while it runs: that of the
// running queue job whose first events name it, else its own.
func (s *Server) streamOf(ctx context.Context, id string) (string, error) {
	if s.cfg.Jobs == nil {
		return id, nil
	}
	js, err := s.cfg.Jobs.Jobs(ctx, 0)
	if err != nil {
		return "", err
	}
	for _, j := range js {
		if j.State != "running" || j.Kind != (app.BisectRequest{}).Kind() {
			continue
		}
		evs, err := s.st.Events(ctx, jobs.EventsOf(j.Key), 0, jobFirst)
		if err != nil {
			return "", err
		}
		for _, e := range evs {
			if ev, err := app.Decode(e); err == nil && ev.Bisection == id {
				return jobs.EventsOf(j.Key), nil
			}
		}
	}
	return id, nil
}

func (s *Server) bisection(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.loadBisection(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "bisection", "Bisection "+v.ID, v)
}

// bisectionLive is the part of the bisection page that changes, reloaded by
// the page on every event.
func (s *Server) bisectionLive(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.loadBisection(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.fragment(w, r, "bisection", "live", v)
}

// bisectionJSON is /api/bisections/{id}: the stored state as package
// bisect writes it (an older state in today's form), with its status, the
// phase the store saved.
func (s *Server) bisectionJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, err := s.st.LoadBisection(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.writeJSON(w, struct {
		ID     string        `json:"id"`
		Status string        `json:"status"`
		State  *bisect.State `json:"state"`
	}{st.ID, string(st.Phase), st})
}
