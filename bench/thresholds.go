package bench

import (
	"github.com/pgbisect/pgbisect/bench/stats"
)

// Thresholds returns the statistical thresholds of one comparison on this
// scenario. Every command (compare, bisect, the nightly pass and the
// bisections it starts) layers them here, the same way, a later layer
// winning:
//
//	base      the command's defaults with the config file's stats section
//	          over them (stats.Overlay.Apply)
//	s.Stats   the scenario's stats: section
//	m         the metric's min_effect (and a count's resolution, 1);
//	          nil m means no metric, as when
//	          planning the samples of all the scenario's metrics at once
//	flags     the command line; nil or zero fields: not given
//
// Fields still zero take bench/stats' defaults.
func (s *Scenario) Thresholds(base stats.Thresholds, m *Metric, flags *stats.Overlay) stats.Thresholds {
	th := s.Stats.Apply(base)
	if m != nil {
		th = stats.Overlay{MinEffect: m.MinEffect}.Apply(th)
		if m.Value == "instructions" {
			// A count's unit: samples without any spread, as counts of
			// one build often are, still get a finite interval and are
			// decided at the first look (stats.Thresholds.Resolution).
			th.Resolution = 1
		}
	}
	if flags != nil {
		th = flags.Apply(th)
	}
	return th.WithDefaults()
}
