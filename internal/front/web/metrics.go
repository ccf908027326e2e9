package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgbisect/pgbisect/store"
)

// collector reads the totals from the store at each scrape, so every
// dashboard (and every process sharing the store) reports the same numbers.
type collector struct {
	st  Counter
	log *slog.Logger

	up, jobs, queue, builds, samples, findings, pending, lastNightly *prometheus.Desc
}

func newCollector(st Counter, log *slog.Logger) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("pgbisect_"+name, help, labels, nil)
	}
	return &collector{st: st, log: log,
		up:          d("store_up", "1 when the results store answered this scrape, 0 when it did not."),
		jobs:        d("jobs", "Queue jobs by status (queued, running, done, failed, cancelled; River's states mapped as store.JobStatus says).", "status"),
		queue:       d("queue_depth", "Queue jobs waiting to run."),
		builds:      d("builds", "Builds recorded, by status.", "status"),
		samples:     d("samples", "Samples recorded."),
		findings:    d("findings", "Findings made."),
		pending:     d("findings_pending", "Findings not yet posted everywhere."),
		lastNightly: d("last_nightly_timestamp_seconds", "When the latest finished nightly pass started (Unix seconds); absent before the first."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.jobs, c.queue, c.builds, c.samples, c.findings, c.pending, c.lastNightly} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.st.Counts(ctx)
	if err != nil {
		c.log.Warn("reading the totals for /metrics", slog.Any("err", err))
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(c.up, 1)
	for _, st := range store.JobStatuses {
		g(c.jobs, float64(n.Jobs[st]), st)
	}
	g(c.queue, float64(n.Jobs["queued"]))
	for st, v := range n.Builds {
		g(c.builds, float64(v), st)
	}
	g(c.samples, float64(n.Samples))
	g(c.findings, float64(n.Findings))
	g(c.pending, float64(n.Pending))
	if !n.LastNightly.IsZero() {
		g(c.lastNightly, float64(n.LastNightly.Unix()))
	}
}
