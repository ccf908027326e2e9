package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/config"
)

func init() {
	register(command{Name: "build", Summary: "build and cache PostgreSQL at revisions; list or prune the cache", Run: runBuild})
}

// buildFlagList is a repeatable string flag.
type buildFlagList []string

func (s *buildFlagList) String() string     { return strings.Join(*s, " ") }
func (s *buildFlagList) Set(v string) error { *s = append(*s, v); return nil }

func runBuild(ctx context.Context, env *Env) error {
	fs := newFlags(env, "build", "[--repo DIR_OR_URL] [--state DIR] [--config FILE] [--configure-flag X ...] [--cflags S] [--all] [--jobs N] [--retry] REV...\n"+
		"       pgbisect build --list\n"+
		"       pgbisect build --prune [--max-age D] [--max-size BYTES]")
	flags := addCommonFlags(fs)
	var configure buildFlagList
	fs.Var(&configure, "configure-flag", "extra configure `FLAG` (repeatable; replaces config build.configure)")
	cflags := fs.String("cflags", "", "`CFLAGS` for configure (default: config build.cflags)")
	jobs := fs.Int("jobs", 0, "make parallelism `N` (default: config build.jobs, else all CPUs)")
	meson := fs.Bool("meson", false, "build with meson and ninja (the tree needs meson.build)")
	retry := fs.Bool("retry", false, "build again commits whose earlier build failed")
	fetch := fs.Bool("fetch", false, "fetch the branch from origin before resolving (a URL repository is fetched when a revision is unknown)")
	list := fs.Bool("list", false, "list the cached builds")
	prune := fs.Bool("prune", false, "remove cached builds older than --max-age or beyond --max-size")
	all := fs.Bool("all", false, "make and install the whole tree, not only what pgbisect runs (default: config build.all)")
	maxAge := fs.Duration("max-age", 0, "with --prune: remove builds older than `D` (default: config build.keep_max_age)")
	maxSize := fs.Int64("max-size", 0, "with --prune: keep at most `BYTES` of builds (default: config build.keep_max_bytes)")
	revs, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	cfg, err := flags.load(env.Stderr)
	if err != nil {
		return err
	}
	if len(configure) > 0 {
		cfg.Build.Configure = configure
	}
	if *cflags != "" {
		cfg.Build.CFLAGS = *cflags
	}
	if *jobs != 0 {
		cfg.Build.Jobs = *jobs
	}
	if *meson {
		cfg.Build.Meson = true
	}
	if *all {
		cfg.Build.All = true
	}
	switch {
	case *list && *prune:
		return usageError("--list and --prune do not go together")
	case (*list || *prune) && len(revs) > 0:
		return usageError("--list and --prune take no revisions")
	case !*list && !*prune && len(revs) == 0:
		return usageError("give at least one revision to build (or --list, --prune)")
	}

	if *list || *prune {
		// Listing needs no repository: the cache describes itself.
		b := build.NewBuilder(nil, cfg.StateDir, cfg.Build.Options, env.Stderr, env.Log)
		if *list {
			installs, err := b.List()
			if err != nil {
				return err
			}
			printInstalls(env, installs)
			return nil
		}
		age, size := cfg.Build.KeepMaxAge, cfg.Build.KeepMaxBytes
		if *maxAge != 0 {
			age = *maxAge
		}
		if *maxSize != 0 {
			size = *maxSize
		}
		if age == 0 && size == 0 {
			return usageError("--prune needs --max-age or --max-size (or build.keep_max_age / keep_max_bytes in the config)")
		}
		removed, err := b.Prune(age, size)
		for _, inst := range removed {
			fmt.Fprintf(env.Stdout, "removed %s %s (%s)\n", build.Short(inst.Commit), inst.Subject, buildHumanBytes(inst.Size))
		}
		if err == nil && len(removed) == 0 {
			fmt.Fprintln(env.Stdout, "nothing to prune")
		}
		return err
	}

	b, repo, err := openBuilder(ctx, env, cfg)
	if err != nil {
		return err
	}
	b.Retry = *retry
	if *fetch {
		if err := repo.Fetch(ctx, cfg.Branch); err != nil {
			return err
		}
	}
	var failed int
	for _, rev := range revs {
		c, err := repo.Resolve(rev)
		if err != nil && repo.Remote() != "" && !*fetch {
			// A URL repository may simply be behind: fetch once and retry.
			fmt.Fprintf(env.Stderr, "%v; fetching %s from %s\n", err, cfg.Branch, repo.Remote())
			if ferr := repo.Fetch(ctx, cfg.Branch); ferr != nil {
				return ferr
			}
			*fetch = true
			c, err = repo.Resolve(rev)
		}
		if err != nil {
			return err
		}
		key, err := b.Key(ctx, c.Hash)
		if err != nil {
			return err
		}
		inst, err := b.Build(ctx, c.Hash)
		var be *build.Error
		if errors.As(err, &be) {
			failed++
			fmt.Fprintf(env.Stdout, "%s %s\n  FAILED in %s; log: %s\n", c.Short(), c.Subject, be.Phase, be.LogPath)
			fmt.Fprintf(env.Stderr, "--- last lines of %s ---\n%s", be.LogPath, be.Tail)
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s %s\n  key:    %s\n  prefix: %s\n", c.Short(), c.Subject, key.ID, inst.Prefix)
		if key.SameAsParent {
			fmt.Fprintf(env.Stdout, "  shares the build of %s: it changes nothing that is compiled\n", build.Short(key.Source))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d revisions did not build", failed, len(revs))
	}
	return nil
}

// openBuilder opens cfg.Repo (cloning a URL into the state directory once)
// and returns a builder with cfg's build options. Other commands that need
// builds (run, compare, bisect, nightly) can use it too.
func openBuilder(ctx context.Context, env *Env, cfg *config.Config) (*build.Builder, *build.Repo, error) {
	a, err := app.Open(ctx, appOptions(cfg, env.Log), nil)
	if err != nil {
		return nil, nil, err
	}
	return a.Builder(ctx, progress(env.Stderr))
}

func printInstalls(env *Env, installs []build.Install) {
	if len(installs) == 0 {
		fmt.Fprintln(env.Stdout, "no cached builds")
		return
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMIT\tAGE\tSIZE\tOPTIONS\tSUBJECT")
	var total int64
	for _, i := range installs {
		subject := i.Subject
		if len(subject) > 60 {
			subject = subject[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", build.Short(i.Commit), buildHumanAge(time.Since(i.BuiltAt)), buildHumanBytes(i.Size), i.Options, subject)
		total += i.Size
	}
	tw.Flush()
	fmt.Fprintf(env.Stdout, "%d builds, %s\n", len(installs), buildHumanBytes(total))
}

func buildHumanAge(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func buildHumanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0fM", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%dK", n/1024)
	}
}
