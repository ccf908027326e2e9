package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{
		Name:    "post",
		Summary: "post findings to GitHub issues (one per culprit); --pending posts what is waiting",
		Run:     postRun,
	})
	register(command{
		Name:    "report",
		Summary: "render a finding as Markdown, plain text or JSON, or write all its files and plots",
		Run:     reportRun,
	})
}

func postRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "post", "[--dry-run] [--pending | FINDING_ID_OR_FILE...]")
	dry := fs.Bool("dry-run", false, "print the title, labels and body that would be posted, and where; post nothing")
	pending := fs.Bool("pending", false, "post every finding that is not yet (fully) posted")
	flags := addStoreFlags(fs)
	args, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if *pending == (len(args) > 0) {
		return usageError("give finding IDs or JSON files, or --pending (not both)")
	}
	cfg, err := flags.load(env.Stderr)
	if err != nil {
		return err
	}
	box, done, err := openOutbox(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	where := app.StoreName(cfg.DB)
	if cfg.GitHub.Repo == "" {
		file := cfg.File
		if file == "" {
			file = "the config file (--config FILE, default configs/pgbisect.yaml)"
		}
		if !*dry {
			return usageError("no GitHub repository to post to: set github.repo (owner/name) in %s", file)
		}
		fmt.Fprintf(env.Stderr, "github.repo is not set in %s: showing the posts for OWNER/NAME\n", file)
		cfg.GitHub.Repo = "OWNER/NAME"
	}
	p, err := notify.NewPoster(cfg.GitHub.Options())
	if err != nil {
		return err
	}
	p.Log = env.Log

	var todo []finding.Outgoing
	if *pending {
		if todo, err = box.Pending(ctx); err != nil {
			return err
		}
		if len(todo) == 0 {
			fmt.Fprintf(env.Stderr, "nothing pending in %s\n", where)
			return nil
		}
	} else {
		for _, a := range args {
			o, err := postResolve(ctx, box, a, !*dry)
			if err != nil {
				return err
			}
			todo = append(todo, o)
		}
	}

	if *dry {
		for _, o := range todo {
			if err := postPrintPlan(ctx, env.Stdout, p, o); err != nil {
				return err
			}
		}
		return nil
	}

	unlock, err := box.Lock(ctx, store.PostLock)
	if err != nil {
		return err
	}
	defer unlock()
	failed := 0
	for _, o := range todo {
		// Re-read under the lock: another poster may have posted it since.
		cur, err := box.LoadFinding(ctx, o.Finding.ID)
		if err != nil {
			return err
		}
		if len(notify.Remaining(cur.Finding, cur.Posts)) == 0 {
			fmt.Fprintf(env.Stdout, "%s\talready posted%s\n", cur.Finding.ID, postSummary(cur.Posts))
			continue
		}
		posts, err := p.PostFinding(ctx, cur.Finding, cur.Posts, func(pst finding.Post) error {
			return box.MarkPosted(ctx, cur.Finding.ID, pst)
		})
		for _, pst := range posts {
			fmt.Fprintf(env.Stdout, "%s\t%s\n", cur.Finding.ID, app.PostLine(pst))
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "pgbisect post: %v\n", err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d findings could not be posted and stay pending; run 'pgbisect post --pending' to retry", failed, len(todo))
	}
	return nil
}

// postResolve returns the finding an argument names: a JSON file (recorded
// in the outbox first when record is set, so its posts are remembered) or
// the ID of a recorded finding.
func postResolve(ctx context.Context, box *store.Store, arg string, record bool) (finding.Outgoing, error) {
	if strings.HasSuffix(arg, ".json") || strings.ContainsRune(arg, os.PathSeparator) {
		f, err := finding.ReadFile(arg)
		if err != nil {
			return finding.Outgoing{}, err
		}
		if o, err := box.LoadFinding(ctx, f.ID); err == nil {
			o.Finding = f
			if record {
				if err := box.Add(ctx, f); err != nil {
					return finding.Outgoing{}, err
				}
			}
			return o, nil
		} else if !errors.Is(err, finding.ErrNotFound) {
			return finding.Outgoing{}, err
		}
		if record {
			if err := box.Add(ctx, f); err != nil {
				return finding.Outgoing{}, err
			}
		}
		return finding.Outgoing{Finding: f}, nil
	}
	return loadFinding(ctx, box, arg)
}

// postPrintPlan prints exactly what posting o would send, and where.
func postPrintPlan(ctx context.Context, w io.Writer, p *notify.Poster, o finding.Outgoing) error {
	plan, err := p.Plan(ctx, o.Finding, o.Posts)
	if err != nil {
		return err
	}
	if len(plan) == 0 {
		if len(notify.Targets(o.Finding)) == 0 {
			fmt.Fprintf(w, "finding %s (%s): nothing to post; a %s without an earlier culprit to follow up is only reported\n\n", o.Finding.ID, o.Finding.Kind, o.Finding.Kind)
		} else {
			fmt.Fprintf(w, "finding %s: already posted%s\n\n", o.Finding.ID, postSummary(o.Posts))
		}
		return nil
	}
	for _, pl := range plan {
		var where string
		switch pl.Action {
		case "create":
			where = "create a new issue in " + pl.Repo
		case "comment":
			where = fmt.Sprintf("comment on issue #%d in %s", pl.Issue, pl.Repo)
		case "skip":
			where = fmt.Sprintf("nothing: no open issue in %s starts with %q", pl.Repo, pl.Target.Key)
		case "create or comment":
			where = fmt.Sprintf("create a new issue in %s, or comment on the open issue whose title starts with %q (not checked: GITHUB_TOKEN is not set)", pl.Repo, pl.Target.Key)
		default:
			where = fmt.Sprintf("comment on the open issue in %s whose title starts with %q, if any (not checked: GITHUB_TOKEN is not set)", pl.Repo, pl.Target.Key)
		}
		fmt.Fprintf(w, "=== finding %s\nWhere:  %s\n", o.Finding.ID, where)
		if strings.HasPrefix(pl.Action, "create") {
			fmt.Fprintf(w, "Title:  %s\nLabels: %s\n", pl.Target.Title, strings.Join(pl.Labels, ", "))
		}
		fmt.Fprintf(w, "Body (%d characters):\n%s\n", len([]rune(pl.Body)), pl.Body)
	}
	return nil
}

func postSummary(posts []finding.Post) string {
	var parts []string
	for _, p := range posts {
		if p.Issue > 0 {
			parts = append(parts, fmt.Sprintf("%s #%d", p.Action, p.Issue))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func reportRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "report", "[--format md|text|json] [--out DIR] FINDING_ID_OR_FILE")
	format := fs.String("format", "md", "output `format`: md, text or json")
	out := fs.String("out", "", "write report.md, report.txt, report.json and the plots into `DIR` instead of printing")
	flags := addStoreFlags(fs)
	args, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageError("give one finding ID or JSON file")
	}
	var f *finding.Finding
	if strings.HasSuffix(args[0], ".json") || strings.ContainsRune(args[0], os.PathSeparator) {
		if f, err = finding.ReadFile(args[0]); err != nil {
			return err
		}
	} else {
		cfg, err := flags.load(env.Stderr)
		if err != nil {
			return err
		}
		box, done, err := openOutbox(ctx, env, cfg)
		if err != nil {
			return err
		}
		defer done()
		o, err := loadFinding(ctx, box, args[0])
		if err != nil {
			return err
		}
		f = o.Finding
	}
	if *out != "" {
		files, err := notify.WriteReport(*out, f)
		if err != nil {
			return err
		}
		for _, name := range files {
			fmt.Fprintln(env.Stdout, filepath.Join(*out, name))
		}
		return nil
	}
	switch *format {
	case "md", "markdown":
		_, err = io.WriteString(env.Stdout, notify.MarkdownFile(f))
	case "text", "txt":
		_, err = io.WriteString(env.Stdout, notify.TextFile(f))
	case "json":
		var b []byte
		if b, err = finding.Marshal(f); err == nil {
			_, err = env.Stdout.Write(b)
		}
	default:
		return usageError("--format %q: want md, text or json", *format)
	}
	return err
}
