package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// The request kinds, listed once. Each row is a kind's request type and,
// for a kind the daemon runs, how its jobs are queued; the operation a job
// runs is the request's runJob method (below). DecodeRequest, the job
// queue (internal/front/jobs, whose job arguments must name the same
// kinds: its tests check) and the error messages read this table.
//
// A new job kind is: its request type (request.go), a row here, its
// runJob, and its job arguments in internal/front/jobs.
var kinds = []kindSpec{
	{BisectRequest{}, &JobPolicy{Attempts: 3}},
	{CompareRequest{}, &JobPolicy{Attempts: 3}},
	{RunRequest{}, nil},
	{NightlyRequest{}, &JobPolicy{Attempts: 3, OnePerTick: true}},
	{DeliverRequest{}, &JobPolicy{Attempts: 20, Posts: true}},
}

// kindSpec is a row of kinds.
type kindSpec struct {
	// zero is a zero request of the kind: its type is the one decoded.
	zero Request
	// job is how the daemon queues the kind; nil: it runs no such job.
	job *JobPolicy
}

// JobPolicy is how the jobs of a request kind are queued and retried.
type JobPolicy struct {
	// Attempts is how many times a job is tried before it is given up.
	Attempts int
	// Posts marks a job that only posts to GitHub: it needs no benchmark
	// machine (every daemon takes it, beside its class's job) and is
	// retried with a backoff that GitHub's rate limits ask for.
	Posts bool
	// OnePerTick makes one job of a schedule's tick per class, however
	// many daemons enqueue it (a nightly pass).
	OnePerTick bool
}

// kindOf returns the row of kind, or nil.
func kindOf(kind string) *kindSpec {
	for i := range kinds {
		if kinds[i].zero.Kind() == kind {
			return &kinds[i]
		}
	}
	return nil
}

// QueuedKinds are the kinds of the requests the daemon runs as jobs.
func QueuedKinds() []string {
	var out []string
	for _, k := range kinds {
		if k.job != nil {
			out = append(out, k.zero.Kind())
		}
	}
	return out
}

// QueuePolicy says how the jobs of kind are queued; false when the daemon
// runs no such job.
func QueuePolicy(kind string) (JobPolicy, bool) {
	k := kindOf(kind)
	if k == nil || k.job == nil {
		return JobPolicy{}, false
	}
	return *k.job, true
}

// CheckQueued says why r cannot be queued, or nil.
func CheckQueued(r Request) error {
	if _, ok := QueuePolicy(r.Kind()); !ok {
		return fmt.Errorf("a %s request cannot be queued: the daemon runs %s", r.Kind(), strings.Join(QueuedKinds(), ", "))
	}
	return nil
}

// unknownKind is the error for a kind not in the table.
func unknownKind(kind string) error {
	var names []string
	for _, k := range kinds {
		names = append(names, k.zero.Kind())
	}
	// %.64q: a kind is a short word; the error quotes no more of one
	// (FuzzDecodeRequest).
	return fmt.Errorf("unknown request kind %.64q (this pgbisect knows %s)", kind, strings.Join(names, ", "))
}

// decode reads a request of the row's type from its JSON, refusing fields
// the type does not have.
func (k *kindSpec) decode(args json.RawMessage) (Request, error) {
	r := reflect.New(reflect.TypeOf(k.zero))
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r.Interface()); err != nil {
		return nil, err
	}
	return r.Elem().Interface().(Request), nil
}

// Encode returns a request as a queue keeps it: its kind and its JSON.
func Encode(r Request) (kind string, args json.RawMessage, err error) {
	data, err := json.Marshal(r)
	if err != nil {
		return "", nil, fmt.Errorf("encoding a %s request: %w", r.Kind(), err)
	}
	return r.Kind(), data, nil
}

// ErrLegacyJob marks a queued job stored by an older pgbisect as the
// command line of 'pgbisect bisect' ({"argv": [...]}): DecodeRequest
// returns it with the arguments, for the caller that knows the command's
// flags to parse (see LegacyJob).
var ErrLegacyJob = errors.New("a job queued as a command line")

// LegacyJob is the arguments of a job queued by an older pgbisect.
type LegacyJob struct {
	Argv      []string `json:"argv"`
	Requester string   `json:"requester,omitempty"`
}

// DecodeRequest reads a request back from a queue's kind and JSON. A job
// an older pgbisect queued as a command line gives a *LegacyJob and an
// error matching ErrLegacyJob.
func DecodeRequest(kind string, args json.RawMessage) (Request, *LegacyJob, error) {
	k := kindOf(kind)
	if k == nil {
		return nil, nil, unknownKind(kind)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(args, &probe); err != nil {
		return nil, nil, fmt.Errorf("a %s request: %w", kind, err)
	}
	if _, ok := probe["argv"]; ok && kind == (BisectRequest{}).Kind() {
		var l LegacyJob
		if err := json.Unmarshal(args, &l); err != nil {
			return nil, nil, fmt.Errorf("a %s request: %w", kind, err)
		}
		return nil, &l, ErrLegacyJob
	}
	r, err := k.decode(args)
	if err != nil {
		return nil, nil, fmt.Errorf("a %s request: %w", kind, err)
	}
	return r, nil, nil
}
