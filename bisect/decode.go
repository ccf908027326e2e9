package bisect

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNotFound is returned (wrapped) by a Saver's load of an unknown
// bisection.
var ErrNotFound = errors.New("no such bisection")

// Decode parses a State saved as JSON.
func Decode(data []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decoding bisection state: %w", err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("bisection state %s has version %d, this pgbisect reads version %d: start it again", s.ID, s.Version, StateVersion)
	}
	if s.Builds == nil {
		s.Builds = map[string]*BuildResult{}
	}
	if s.Samples == nil {
		s.Samples = map[string][]float64{}
	}
	if s.SampleSeq == nil {
		s.SampleSeq = map[string][]int{}
	}
	if s.Window > 0 {
		for k, xs := range s.Samples {
			if len(s.SampleSeq[k]) != len(xs) {
				return nil, fmt.Errorf("bisection state %s: key %s has %d samples but %d sample times: the state is damaged, start it again", s.ID, k, len(xs), len(s.SampleSeq[k]))
			}
		}
	}
	if err := s.decodeCurve(); err != nil {
		return nil, err
	}
	return &s, nil
}
