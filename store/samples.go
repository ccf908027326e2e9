package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Sample is one value of one metric from one workload run on a freshly
// started server: pgbisect's unit of replication.
type Sample struct {
	ID       int64
	BuildKey string
	// Commit is the full hash of the build's commit.
	Commit   string
	Scenario string
	// Point names the matrix point, e.g. "clients=4"; "" when the scenario
	// has no matrix.
	Point  string
	Metric string
	Value  float64
	// Index numbers the samples of one build, scenario and point.
	Index int
	// Time is when the run finished; zero means now.
	Time time.Time
	// EnvironmentID is from Environment; 0 for none.
	EnvironmentID int64
	// NightlyID is the nightly run that took the sample; 0 for none.
	NightlyID int64
	// BisectionID is the bisection that took the sample; "" for none.
	BisectionID string
	// Machine and MachineClass are the machine that measured the sample
	// and its class; "" when unknown. AddSamples under a job's lease
	// fills them from the lease when empty.
	Machine      string
	MachineClass string
	// Seq is, for a bisection's sample, its time on the bisection's clock
	// (bisect.State.SamplesTaken just before it); ignored without a
	// BisectionID, and -1 when read back from a sample stored without it.
	Seq int
	// Superseded is set on a bisection's sample no comparison uses:
	// taken for a comparison that restarted on another machine, or
	// stored by a process that stopped before it saved the state (see
	// SupersedeSamples).
	Superseded bool
}

// Environment stores the description of a machine and its settings (opaque
// JSON from package bench) and returns its id. Identical descriptions share
// one id: jsonb normalises key order and spacing before they are compared.
// Under a job's lease (WithLease) the environment records the lease's
// machine, and identical descriptions of two machines are two rows.
func (s *Store) Environment(ctx context.Context, info json.RawMessage) (int64, error) {
	var id int64
	lease, _ := LeaseOf(ctx)
	err := s.db.QueryRow(ctx, `
		INSERT INTO environments (fingerprint, info, machine) VALUES (md5($1::jsonb::text || $2), $1::jsonb, $2)
		ON CONFLICT (fingerprint) DO UPDATE SET fingerprint = EXCLUDED.fingerprint
		RETURNING id`, string(jsonOr(info, "{}")), lease.Machine).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("recording environment: %w", err)
	}
	return id, nil
}

// EnvironmentInfo returns the description stored under id.
func (s *Store) EnvironmentInfo(ctx context.Context, id int64) (json.RawMessage, error) {
	var info json.RawMessage
	if err := s.db.QueryRow(ctx, "SELECT info FROM environments WHERE id = $1", id).Scan(&info); err != nil {
		return nil, fmt.Errorf("reading environment %d: %w", id, err)
	}
	return info, nil
}

// AddSample stores one sample.
func (s *Store) AddSample(ctx context.Context, sm Sample) error {
	return s.AddSamples(ctx, []Sample{sm})
}

// AddSamples stores samples in one statement, all or none. Under a job's
// lease (WithLease) the statement is fenced by the lease and the samples
// record the lease's machine and class.
func (s *Store) AddSamples(ctx context.Context, samples []Sample) error {
	if len(samples) == 0 {
		return nil
	}
	n := len(samples)
	var (
		keys, commits, scenarios, points, metrics = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		values                                    = make([]float64, n)
		indexes                                   = make([]int32, n)
		times                                     = make([]time.Time, n)
		envs, nightlies                           = make([]int64, n), make([]int64, n)
		bisections, machines, classes             = make([]string, n), make([]string, n), make([]string, n)
		seqs                                      = make([]int32, n)
	)
	lease, _ := LeaseOf(ctx)
	for i, sm := range samples {
		if sm.BuildKey == "" || sm.Commit == "" || sm.Scenario == "" || sm.Metric == "" {
			return fmt.Errorf("adding sample %d: build key, commit, scenario and metric are required", i)
		}
		keys[i], commits[i], scenarios[i], points[i], metrics[i] = sm.BuildKey, sm.Commit, sm.Scenario, sm.Point, sm.Metric
		values[i], indexes[i], times[i] = sm.Value, int32(sm.Index), timeOr(sm.Time)
		envs[i], nightlies[i], bisections[i] = sm.EnvironmentID, sm.NightlyID, sm.BisectionID
		machines[i], classes[i], seqs[i] = sm.Machine, sm.MachineClass, int32(sm.Seq)
		if machines[i] == "" {
			machines[i], classes[i] = lease.Machine, lease.Class
		}
	}
	err := s.fenced(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `
		INSERT INTO samples (build_key, commit, scenario, point, metric, value, sample_index, taken_at, environment_id,
			nightly_id, bisection_id, machine, machine_class, bisection_seq)
		SELECT k, c, sc, p, m, v, i, t, nullif(e, 0), nullif(n, 0), nullif(b, ''), ma, mc, CASE WHEN b <> '' THEN q END
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::int4[],
			$8::timestamptz[], $9::int8[], $10::int8[], $11::text[], $12::text[], $13::text[], $14::int4[]) AS u(k, c, sc, p, m, v, i, t, e, n, b, ma, mc, q)`,
			keys, commits, scenarios, points, metrics, values, indexes, times, envs, nightlies, bisections, machines, classes, seqs)
		return err
	})
	if err != nil {
		return fmt.Errorf("adding %d samples: %w", n, err)
	}
	return nil
}

// SampleQuery selects samples; empty fields match everything.
type SampleQuery struct {
	BuildKey  string
	Commit    string
	Scenario  string
	Point     string
	Metric    string
	NightlyID int64
	// BisectionID selects the samples of one bisection.
	BisectionID string
	// AnyPoint matches every point; otherwise Point "" matches only
	// samples without a matrix point.
	AnyPoint bool
	// Current leaves out superseded samples.
	Current bool
}

// Samples returns the samples q selects, oldest first.
func (s *Store) Samples(ctx context.Context, q SampleQuery) ([]Sample, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.BuildKey != "" {
		add("build_key = $%d", q.BuildKey)
	}
	if q.Commit != "" {
		add("commit = $%d", q.Commit)
	}
	if q.Scenario != "" {
		add("scenario = $%d", q.Scenario)
	}
	if !q.AnyPoint {
		add("point = $%d", q.Point)
	}
	if q.Metric != "" {
		add("metric = $%d", q.Metric)
	}
	if q.NightlyID != 0 {
		add("nightly_id = $%d", q.NightlyID)
	}
	if q.BisectionID != "" {
		add("bisection_id = $%d", q.BisectionID)
	}
	if q.Current {
		where = append(where, "NOT superseded")
	}
	sql := `SELECT id, build_key, commit, scenario, point, metric, value, sample_index, taken_at,
		coalesce(environment_id, 0), coalesce(nightly_id, 0), coalesce(bisection_id, ''), machine, machine_class,
		coalesce(bisection_seq, -1), superseded FROM samples`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY taken_at, sample_index, id"
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("reading samples: %w", err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var sm Sample
		var idx, seq int32
		if err := rows.Scan(&sm.ID, &sm.BuildKey, &sm.Commit, &sm.Scenario, &sm.Point, &sm.Metric, &sm.Value, &idx,
			&sm.Time, &sm.EnvironmentID, &sm.NightlyID, &sm.BisectionID, &sm.Machine, &sm.MachineClass, &seq, &sm.Superseded); err != nil {
			return nil, fmt.Errorf("reading samples: %w", err)
		}
		sm.Index, sm.Seq = int(idx), int(seq)
		out = append(out, sm)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading samples: %w", err)
	}
	return out, nil
}

// SeriesPoint is one night of a nightly series: the samples a nightly run
// took of the commit it measured.
type SeriesPoint struct {
	NightlyID int64
	Commit    string
	// Time is when the nightly run started.
	Time time.Time
	// Values are the run's samples of Commit, in sample order.
	Values []float64
}

// Series returns, oldest first, the nightly results of one scenario, metric
// and point on branch ("" for every branch): the input of the change-point
// pass. Only the samples of each night's own commit count, not those of the
// earlier build it was compared with. The series is that of the machine
// class of ctx's job (ClassOf).
func (s *Store) Series(ctx context.Context, branch, scenario, metric, point string) ([]SeriesPoint, error) {
	return s.ClassSeries(ctx, ClassOf(ctx), branch, scenario, metric, point)
}

// ClassSeries is Series of machine class ("" is the default class), for
// readers that are not a job of that class, such as the dashboard.
func (s *Store) ClassSeries(ctx context.Context, class, branch, scenario, metric, point string) ([]SeriesPoint, error) {
	rows, err := s.db.Query(ctx, `
		SELECT n.id, n.commit, n.started_at, array_agg(s.value ORDER BY s.sample_index, s.id)
		FROM nightly_runs n JOIN samples s ON s.nightly_id = n.id AND s.commit = n.commit
		WHERE s.scenario = $1 AND s.metric = $2 AND s.point = $3 AND ($4 = '' OR n.branch = $4) AND n.machine_class = $5
		GROUP BY n.id, n.commit, n.started_at
		ORDER BY n.started_at, n.id`, scenario, metric, point, branch, class)
	if err != nil {
		return nil, fmt.Errorf("reading the series of %s %s %s: %w", scenario, point, metric, err)
	}
	defer rows.Close()
	var out []SeriesPoint
	for rows.Next() {
		var p SeriesPoint
		if err := rows.Scan(&p.NightlyID, &p.Commit, &p.Time, &p.Values); err != nil {
			return nil, fmt.Errorf("reading the series of %s %s %s: %w", scenario, point, metric, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
