// Package jobs runs pgbisect's work on River (github.com/riverqueue/river),
// in the results database, on any number of machines: a bisection, a
// comparison, a nightly pass and posting findings are River jobs whose
// arguments carry the application's typed request (internal/app), and
// whose workers call the application's operations.
//
// River decides which machine takes a job; pgbisect adds what River lacks
// for jobs that run for hours on one benchmark machine:
//
//   - A queue per machine class ("bench-2core"): a job names the class it
//     needs, and a daemon works its class's queue one job at a time.
//   - A lease per running job (store.AcquireLease), renewed while the job
//     runs and checked, with its epoch, in the transaction of every
//     sample and state save (store.WithLease). River's stuck-job rescuer has
//     no heartbeat, so it is pushed out of the way (RescueStuckJobsAfter
//     of two weeks, no job timeout) and a reaper of pgbisect's moves the
//     job of a dead or paused machine to another one (Reap).
//   - A clean shutdown snoozes the running job instead of counting a
//     failed attempt.
package jobs

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/pgbisect/pgbisect/internal/app"
)

// DefaultClass is the machine class of a daemon and a job that name none.
const DefaultClass = "default"

// PostQueue is the queue of post jobs: posting needs no benchmark machine,
// so every daemon takes them, beside its class's job.
const PostQueue = "post"

// Common is what every pgbisect job's arguments hold besides the request.
type Common struct {
	// Key names the job across River rows: the row that continues a job
	// taken from a dead machine has the same key, and so the same lease,
	// events stream and log.
	Key string `json:"key"`
	// Class is the machine class that runs the job (its River queue).
	Class string `json:"class"`
}

// Args are the arguments of a job that runs a request of type R: River
// stores them under R's kind, with the request as it is.
type Args[R app.Request] struct {
	Common
	// Tick is the schedule's tick a job of a kind queued once per tick
	// (a nightly pass) is for: with unique-by-arguments insertion, two
	// daemons that both enqueue a tick make one job. Zero for other kinds.
	Tick    time.Time `json:"tick,omitzero"`
	Request R         `json:"request"`
}

// Kind implements river.JobArgs: the request's kind.
func (Args[R]) Kind() string {
	var r R
	return r.Kind()
}

// jobKinds are the kinds River runs, one line each: the queued kinds of
// app's table (TestJobKindsAreTheQueuedKinds holds them equal). A new job
// kind adds its line here.
var jobKinds = []jobKind{
	kindOf[app.BisectRequest]{},
	kindOf[app.CompareRequest]{},
	kindOf[app.NightlyRequest]{},
	kindOf[app.DeliverRequest]{},
}

// jobKind is a kind River runs: how a request becomes its job's
// arguments, and its worker.
type jobKind interface {
	kind() string
	args(r app.Request, c Common, p app.JobPolicy) (river.JobArgs, bool)
	addWorker(w *river.Workers, d *Daemon)
}

type kindOf[R app.Request] struct{}

func (kindOf[R]) kind() string { return Args[R]{}.Kind() }

func (kindOf[R]) args(r app.Request, c Common, p app.JobPolicy) (river.JobArgs, bool) {
	req, ok := r.(R)
	if !ok {
		return nil, false
	}
	a := Args[R]{Common: c, Request: req}
	if p.OnePerTick {
		a.Tick = time.Now().UTC().Truncate(time.Second)
	}
	return a, true
}

func (kindOf[R]) addWorker(w *river.Workers, d *Daemon) { river.AddWorker(w, &worker[R]{d: d}) }

// NewArgs wraps a request into its job's arguments for class ("": the
// default), with a fresh key, and returns them with the options they are
// inserted with.
func NewArgs(r app.Request, class string) (river.JobArgs, *river.InsertOpts, error) {
	return newArgs(r, Common{Key: NewKey(r.Kind()), Class: class})
}

func newArgs(r app.Request, c Common) (river.JobArgs, *river.InsertOpts, error) {
	if c.Class == "" {
		c.Class = DefaultClass
	}
	if err := CheckClass(c.Class); err != nil {
		return nil, nil, err
	}
	p, ok := app.QueuePolicy(r.Kind())
	if !ok {
		return nil, nil, app.CheckQueued(r)
	}
	for _, k := range jobKinds {
		if a, ok := k.args(r, c, p); ok {
			return a, policyOpts(p, c.Class), nil
		}
	}
	return nil, nil, fmt.Errorf("a %s request has no job arguments in internal/front/jobs (jobKinds)", r.Kind())
}

// rawArgs are a job's arguments as stored, for the reaper's continuation
// of a job: the same kind and JSON in a new row.
type rawArgs struct {
	kind string
	json json.RawMessage
}

func (r rawArgs) Kind() string                 { return r.kind }
func (r rawArgs) MarshalJSON() ([]byte, error) { return r.json, nil }

// NewKey returns a fresh job key.
func NewKey(kind string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

// queueName is River's rule for queue names.
var queueName = regexp.MustCompile(`^[a-z0-9]+(?:[_|\-]?[a-z0-9]+)*$`)

// CheckClass checks a machine class as a River queue name.
func CheckClass(class string) error {
	if class == PostQueue {
		return fmt.Errorf("machine class %q is reserved for posting findings: choose another", class)
	}
	if len(class) > 64 || !queueName.MatchString(class) {
		return fmt.Errorf("machine class %q: use lowercase letters and digits separated by single '-' or '_', at most 64 characters (e.g. bench-2core)", class)
	}
	return nil
}

// MachineName normalises a host name to River's queue-name rules (the
// form machine names take in pgbisect): lowercase, runs of other
// characters as one '-', at most 64 characters. "Bench_01.lab" becomes
// "bench_01-lab".
func MachineName(host string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(host) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if r == '_' && b.Len() > 0 && !dash {
			b.WriteRune(r)
			dash = true
			continue
		}
		if !ok {
			if b.Len() > 0 && !dash {
				b.WriteByte('-')
				dash = true
			}
			continue
		}
		b.WriteRune(r)
		dash = false
	}
	s := strings.TrimRight(b.String(), "-_")
	if len(s) > 64 {
		s = strings.TrimRight(s[:64], "-_")
	}
	if s == "" {
		s = "machine"
	}
	return s
}

// insertOpts are the insert options of a job of kind for class (the
// kind's app.QueuePolicy).
func insertOpts(kind, class string) *river.InsertOpts {
	p, _ := app.QueuePolicy(kind)
	return policyOpts(p, class)
}

// policyOpts are the insert options of a job of policy p for class.
func policyOpts(p app.JobPolicy, class string) *river.InsertOpts {
	o := &river.InsertOpts{Queue: class, MaxAttempts: max(p.Attempts, 1)}
	if p.Posts {
		o.Queue = PostQueue
	}
	if p.OnePerTick {
		o.UniqueOpts = river.UniqueOpts{ByArgs: true}
	}
	return o
}
