package stats

import "time"

// Overlay is a layer of statistical thresholds as the config file's and a
// scenario's stats sections and the command-line flags give them: zero
// fields keep what the layer below says (in the end DefaultThresholds).
type Overlay struct {
	Alpha        float64       `yaml:"alpha"`
	Confidence   float64       `yaml:"confidence"`
	MinEffect    float64       `yaml:"min_effect"`
	StartSamples int           `yaml:"start_samples"`
	Batch        int           `yaml:"batch"`
	MaxSamples   int           `yaml:"max_samples"`
	MaxTime      time.Duration `yaml:"max_time"`
}

// Apply returns th with every non-zero field of s put over it. Layers are
// applied in order (config file, scenario, flags), so a later one wins.
func (s Overlay) Apply(th Thresholds) Thresholds {
	if s.Alpha > 0 {
		th.Alpha = s.Alpha
	}
	if s.Confidence > 0 {
		th.Confidence = s.Confidence
	}
	if s.MinEffect > 0 {
		th.MinEffect = s.MinEffect
	}
	if s.StartSamples > 0 {
		th.StartSamples = s.StartSamples
	}
	if s.Batch > 0 {
		th.Batch = s.Batch
	}
	if s.MaxSamples > 0 {
		th.MaxSamples = s.MaxSamples
	}
	if s.MaxTime > 0 {
		th.MaxTime = s.MaxTime
	}
	return th
}
