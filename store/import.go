package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Imported counts what Import moved into the store and what it found there
// already.
type Imported struct {
	Bisections, Findings, Posts int
	// Present counts bisections and findings already in the store, left
	// as they are: the store's copy is the newer one.
	Present int
}

// Import loads what pgbisect kept in files before it had the results store
// into s, once: the resumable state of each bisection
// (stateDir/bisections/ID.json) and the outbox of findings
// (stateDir/findings/ID.json with the posts made for it in
// ID.posts.json). It is idempotent: a bisection or finding already in the
// store is left alone (it may have moved on since), and only posts the
// store does not have are added, so running it twice imports nothing the
// second time. The files are left where they are. Missing directories are
// nothing to import.
func (s *Store) Import(ctx context.Context, stateDir string) (Imported, error) {
	var n Imported
	if err := s.importBisections(ctx, filepath.Join(stateDir, "bisections"), &n); err != nil {
		return n, err
	}
	if err := s.importFindings(ctx, filepath.Join(stateDir, "findings"), &n); err != nil {
		return n, err
	}
	return n, nil
}

// stateFiles lists dir's *.json files, leaving out temporary files (".x")
// and, unless posts, the posts files of findings.
func stateFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".posts.json") {
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	return out, nil
}

func (s *Store) importBisections(ctx context.Context, dir string, n *Imported) error {
	paths, err := stateFiles(dir)
	if err != nil {
		return err
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("importing %s: %w", p, err)
		}
		st, err := bisect.Decode(data)
		if err != nil {
			return fmt.Errorf("importing %s: %w", p, err)
		}
		if want := strings.TrimSuffix(filepath.Base(p), ".json"); st.ID != want {
			return fmt.Errorf("importing %s: it holds bisection %q, not %q: rename the file or remove it", p, st.ID, want)
		}
		// Saved again rather than copied, so it is in this pgbisect's form.
		data, err = json.Marshal(st)
		if err != nil {
			return fmt.Errorf("importing %s: %w", p, err)
		}
		tag, err := s.db.Exec(ctx, `INSERT INTO bisections (id, status, state) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`,
			st.ID, string(st.Phase), data)
		if err != nil {
			return fmt.Errorf("importing %s: %w", p, err)
		}
		if tag.RowsAffected() == 0 {
			n.Present++
			continue
		}
		n.Bisections++
	}
	return nil
}

func (s *Store) importFindings(ctx context.Context, dir string, n *Imported) error {
	paths, err := stateFiles(dir)
	if err != nil {
		return err
	}
	for _, p := range paths {
		f, err := finding.ReadFile(p)
		if err != nil {
			return fmt.Errorf("importing: %w", err)
		}
		posts, err := readPosts(strings.TrimSuffix(p, ".json") + ".posts.json")
		if err != nil {
			return err
		}
		have, err := s.Finding(ctx, f.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			if err := s.Add(ctx, f); err != nil {
				return fmt.Errorf("importing %s: %w", p, err)
			}
			n.Findings++
		case err != nil:
			return fmt.Errorf("importing %s: %w", p, err)
		default:
			n.Present++
		}
		for _, pst := range posts {
			if slices.ContainsFunc(have.Posts, func(q finding.Post) bool {
				return q.Key == pst.Key && q.Action == pst.Action && q.Issue == pst.Issue && q.CommentID == pst.CommentID
			}) {
				continue
			}
			if err := s.MarkPosted(ctx, f.ID, pst); err != nil {
				return fmt.Errorf("importing the posts of %s: %w", p, err)
			}
			n.Posts++
		}
	}
	return nil
}

// readPosts reads the posts file of a finding of the old file outbox; a
// missing one means nothing was posted.
func readPosts(path string) ([]finding.Post, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", path, err)
	}
	var posts []finding.Post
	if err := json.Unmarshal(data, &posts); err != nil {
		return nil, fmt.Errorf("importing %s: %w", path, err)
	}
	return posts, nil
}
