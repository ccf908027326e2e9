package bisect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileSaver keeps each bisection as Dir/bisections/<id>.json, replaced
// atomically (write to a temporary file, sync, rename), so a crash leaves
// either the previous or the new state, never half of one.
type FileSaver struct {
	Dir string // the state directory
}

// Path returns the file of bisection id.
func (f FileSaver) Path(id string) string {
	return filepath.Join(f.Dir, "bisections", id+".json")
}

// Save writes s.
func (f FileSaver) Save(_ context.Context, s *State) error {
	data, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return fmt.Errorf("encoding bisection state: %w", err)
	}
	path := f.Path(s.ID)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+s.ID+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ErrNotFound is returned by Load for an unknown bisection.
var ErrNotFound = errors.New("no such bisection")

// Load reads bisection id.
func (f FileSaver) Load(_ context.Context, id string) (*State, error) {
	path := f.Path(id)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (looked in %s)", ErrNotFound, id, filepath.Dir(path))
	}
	if err != nil {
		return nil, err
	}
	return Decode(data)
}

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
	return &s, nil
}
