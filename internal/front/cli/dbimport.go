package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/pgbisect/pgbisect/internal/app"
)

// dbImport is "pgbisect db import": it loads the bisections and findings an
// older pgbisect kept in files under its state directory into the results
// store, once (store.Store.Import). Running it again imports nothing.
func dbImport(ctx context.Context, env *Env) error {
	fs := newFlags(env, "db import", "[--state-dir DIR] [flags]")
	from := fs.String("state-dir", "", "the state `DIR` whose bisections/ and findings/ files to import (default: the state directory)")
	flags := addStoreFlags(fs)
	if err := parseNoArgs(fs, env, "db import takes no arguments (give the directory with --state-dir DIR)"); err != nil {
		return err
	}
	cfg, err := flags.load(env.Stderr)
	if err != nil {
		return err
	}
	dir := cfg.StateDir
	if *from != "" {
		if dir, err = filepath.Abs(*from); err != nil {
			return err
		}
	}
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	n, err := st.Import(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "imported %d bisections, %d findings and %d posts from %s into %s", n.Bisections, n.Findings, n.Posts, dir, app.StoreName(cfg.DB))
	if n.Present > 0 {
		fmt.Fprintf(env.Stdout, "; %d were there already and are left as they are", n.Present)
	}
	fmt.Fprintln(env.Stdout)
	return nil
}
