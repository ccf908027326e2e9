package intake

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/notify"
)

// results returns the bodies of the bot's result comments (those with a
// result marker) on the fake.
func (f *fixture) results() []string {
	f.hub.Lock()
	defer f.hub.Unlock()
	var out []string
	for _, b := range f.hub.Replies {
		if strings.HasPrefix(b, "<!-- pgbisect:result ") {
			out = append(out, b)
		}
	}
	return out
}

func (f *fixture) edits() int {
	f.hub.Lock()
	defer f.hub.Unlock()
	return f.hub.Edits
}

// TestAnswersFollowJobEvents: the reply to a command is edited at the
// milestones of the job's stored events (as a job on another machine
// records them, through the app's journal), once per pass whatever the
// number of events, and the finding is posted in the same thread exactly
// once, also when the bot stopped between posting it and recording it.
func TestAnswersFollowJobEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC) // before the other tests': the cursor is shared
	f.hub.Comment(301, 60, "andres", "@pgbisect bisect copy-single --good A --bad B", t0)
	d := f.dispatcher(t)
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.queued) != 1 {
		t.Fatalf("queued %v", f.queued)
	}
	id, _ := strconv.ParseInt(f.queued[0], 10, 64)
	var replyID int64
	if err := f.st.Pool().QueryRow(ctx, "SELECT reply_id FROM github_commands WHERE comment_id = 301").Scan(&replyID); err != nil {
		t.Fatal(err)
	}
	reply := func() string {
		f.hub.Lock()
		defer f.hub.Unlock()
		return f.hub.Replies[replyID]
	}

	// Nothing has run: no edit.
	if n, err := d.Follow(ctx); err != nil || n != 0 || f.edits() != 0 {
		t.Fatalf("follow before the job ran: %d %v, %d edits", n, err, f.edits())
	}

	// The job runs (elsewhere): its events go to the store.
	job := app.Journal(ctx, f.st, EventsOf(id), nil, nil)
	job(app.Event{Kind: app.KindStart, Bisection: "b1", Text: "bisection b1: 12 commits, 11 can be culprits (resume with: pgbisect bisect --resume b1)"})
	for i := range 40 {
		job(app.Event{Kind: app.KindSample, Bisection: "b1", Done: i, Of: 40})
	}
	job(app.Event{Kind: app.KindEndpoints, Bisection: "b1", Text: "aaaa..bbbb: regression, +10.2% [8.1%, 12.4%]"})
	job(app.Event{Kind: app.KindSplit, Bisection: "b1", Text: "split aaaa..bbbb at cccc"})
	job(app.Event{Kind: app.KindCulprit, Bisection: "b1", Commit: "1111", Text: "culprit: 1111111111 Make COPY slower (regression, +10.1%)"})
	if n, err := d.Follow(ctx); err != nil || n != 1 {
		t.Fatalf("follow: %d %v", n, err)
	}
	if f.edits() != 1 {
		t.Errorf("%d edits for three milestones in one pass, want 1", f.edits())
	}
	for _, want := range []string{"@andres queued as job " + f.queued[0],
		"\n\n- started: bisection b1: 12 commits, 11 can be culprits\n- endpoints verified: aaaa..bbbb: regression, +10.2% [8.1%, 12.4%]\n- culprit: 1111111111 Make COPY slower (regression, +10.1%)"} {
		if !strings.Contains(reply(), want) {
			t.Errorf("reply lacks %q:\n%s", want, reply())
		}
	}
	// Samples are no milestone: no edit.
	for i := range 20 {
		job(app.Event{Kind: app.KindSample, Bisection: "b1", Done: i, Of: 20})
	}
	if n, err := d.Follow(ctx); err != nil || n != 0 || f.edits() != 1 {
		t.Errorf("follow after samples only: %d %v, %d edits", n, err, f.edits())
	}

	// The finding, then the end.
	data, err := os.ReadFile("../../../notify/testdata/regression-two-culprits.json")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := finding.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.Add(ctx, fd); err != nil {
		t.Fatal(err)
	}
	var progress string
	var seq int64
	if err := f.st.Pool().QueryRow(ctx, "SELECT progress, progress_seq FROM github_commands WHERE comment_id = 301").Scan(&progress, &seq); err != nil {
		t.Fatal(err)
	}
	job(app.Event{Kind: app.KindOutcome, Bisection: "b1", Text: "regression: 2 culprits"})
	job(app.Event{Kind: app.KindDone, Bisection: "b1", Finding: fd.ID})
	if n, err := d.Follow(ctx); err != nil || n != 1 {
		t.Fatalf("follow at the end: %d %v", n, err)
	}
	if !strings.HasSuffix(reply(), "\n- outcome: regression: 2 culprits\n- done") {
		t.Errorf("reply at the end:\n%s", reply())
	}
	rs := f.results()
	if len(rs) != 1 {
		t.Fatalf("%d result comments, want 1", len(rs))
	}
	for _, want := range []string{"@andres job " + f.queued[0] + " (`bisect copy-single --good A --bad B`) finished: **" + "[",
		"The finding: http://bench.example.org:8080/findings/" + fd.ID, "Each culprit gets its issue"} {
		if !strings.Contains(rs[0], want) {
			t.Errorf("result lacks %q:\n%.600s", want, rs[0])
		}
	}

	// The bot stopped after posting the result, before recording it: a
	// restarted bot finds it by its marker and posts nothing more.
	if _, err := f.st.Pool().Exec(ctx, "UPDATE github_commands SET progress = $1, progress_seq = $2, final_id = NULL, closed_at = NULL WHERE comment_id = 301",
		progress, seq); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := f.dispatcher(t).Follow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rs := f.results(); len(rs) != 1 {
		t.Errorf("%d result comments after a restart, want 1", len(rs))
	}
	var closed bool
	if err := f.st.Pool().QueryRow(ctx, "SELECT closed_at IS NOT NULL AND final_id IS NOT NULL FROM github_commands WHERE comment_id = 301").Scan(&closed); err != nil || !closed {
		t.Errorf("answer not closed after the restart: %v %v", closed, err)
	}
	if strings.Count(reply(), "- done") != 1 {
		t.Errorf("reply after the restart:\n%s", reply())
	}
}

// TestAnswerOfAFailedJob: a job that fails says so in its reply and in a
// result comment that names the requester; a comparison's verdicts are
// its result.
func TestAnswerOfAFailedJob(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.hub.Comment(401, 61, "andres", "@pgbisect bisect copy-single --good A --bad B", time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC))
	d := f.dispatcher(t)
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseInt(f.queued[0], 10, 64)
	job := app.Journal(ctx, f.st, EventsOf(id), nil, nil)
	job(app.Event{Kind: app.KindDone, Error: "building 1a2b3c: configure failed\nlong log"})
	if _, err := d.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	rs := f.results()
	if len(rs) != 1 || !strings.Contains(rs[0], "@andres job "+f.queued[0]+" (`bisect copy-single --good A --bad B`) failed: building 1a2b3c: configure failed.") {
		t.Errorf("result comments %q", rs)
	}

	f.hub.Comment(402, 61, "andres", "@pgbisect bisect copy-single --good C --bad D", time.Date(2026, 11, 29, 15, 1, 0, 0, time.UTC))
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	id, _ = strconv.ParseInt(f.queued[1], 10, 64)
	job = app.Journal(ctx, f.st, EventsOf(id), nil, nil)
	verdicts := "copy-single: A = 1a2b3c, B = 1a2b3c+patch\ncopy_time: improvement, B/A 0.493 [0.335, 0.716], p 0.0001, n 20+20"
	job(app.Event{Kind: app.KindDone, Result: verdicts})
	if _, err := d.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	if rs := f.results(); len(rs) != 2 || !strings.Contains(strings.Join(rs, "\n"), "finished:\n\n```\n"+verdicts+"\n```") {
		t.Errorf("result comments %q", rs)
	}
}

// TestFollowStopsAtTheRateLimit: when GitHub refuses an edit for its rate
// limit, the pass stops (the other answers are not tried), nothing is
// recorded as shown, and no request is made before the reset; a pass after
// it edits every answer.
func TestFollowStopsAtTheRateLimit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	f.hub.Comment(501, 62, "andres", "@pgbisect bisect copy-single --good A --bad B", t0)
	f.hub.Comment(502, 63, "andres", "@pgbisect bisect copy-single --good C --bad D", t0.Add(time.Minute))
	d := f.dispatcher(t)
	if _, err := d.Poll(ctx); err != nil || len(f.queued) != 2 {
		t.Fatalf("poll: %v, queued %v", err, f.queued)
	}
	for _, q := range f.queued {
		id, _ := strconv.ParseInt(q, 10, 64)
		app.Journal(ctx, f.st, EventsOf(id), nil, nil)(app.Event{Kind: app.KindStart, Text: "bisection " + q})
	}
	f.hub.Lock()
	f.hub.LimitEdits = true
	f.hub.Unlock()
	if _, err := d.Follow(ctx); err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("rate-limited pass: %v", err)
	}
	// Until the reset GitHub announced, go-github does not even ask.
	if _, err := d.Follow(ctx); err == nil {
		t.Error("a pass before the reset went through")
	}
	f.hub.Lock()
	limited := f.hub.Limited
	f.hub.LimitEdits = false
	f.hub.Unlock()
	if limited != 1 {
		t.Errorf("%d edits tried at the rate limit, want 1 (then stop, and ask no more before the reset)", limited)
	}
	// Later (a new client: the reset has passed), every answer is edited.
	if n, err := f.dispatcher(t).Follow(ctx); err != nil || n != 2 || f.edits() != 2 {
		t.Errorf("next pass: %d answers (%v), %d edits; want 2 and 2", n, err, f.edits())
	}
}

// TestFailedAttemptRetried: a failed attempt of a job River will run again
// is not its end: while the job is running the failure is left to read
// again, once a retry's events follow it is shown as a failed attempt, and
// only the last attempt's failure ends the answer.
func TestFailedAttemptRetried(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.hub.Comment(601, 64, "andres", "@pgbisect bisect copy-single --good A --bad B", time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC))
	d := f.dispatcher(t)
	pending := true
	f.pending = func(_ context.Context, job string) (bool, error) {
		if job != f.queued[0] {
			t.Errorf("Pending(%q), want job %s", job, f.queued[0])
		}
		return pending, nil
	}
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseInt(f.queued[0], 10, 64)
	job := app.Journal(ctx, f.st, EventsOf(id), nil, nil)
	job(app.Event{Kind: app.KindStart, Text: "bisection b2"})
	job(app.Event{Kind: app.KindDone, Error: "the store went away"})
	for range 2 {
		if _, err := d.Follow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.results()) != 0 || f.edits() != 1 {
		t.Fatalf("after a failed attempt of a running job: %d results, %d edits; want 0 and 1", len(f.results()), f.edits())
	}
	job(app.Event{Kind: app.KindEndpoints, Text: "a..b: regression"})
	job(app.Event{Kind: app.KindDone, Error: "configure failed"})
	if _, err := d.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	pending = false
	if _, err := d.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	var reply string
	f.hub.Lock()
	for _, b := range f.hub.Replies {
		if strings.Contains(b, "queued as job") {
			reply = b
		}
	}
	f.hub.Unlock()
	if !strings.HasSuffix(reply, "- started: bisection b2\n- attempt failed: the store went away; retried\n- endpoints verified: a..b: regression\n- failed: configure failed") {
		t.Errorf("reply:\n%s", reply)
	}
	if rs := f.results(); len(rs) != 1 || !strings.Contains(rs[0], "failed: configure failed.") {
		t.Errorf("results %q", rs)
	}
}

// TestFollowDeletedReply: a reply someone deleted is not edited (and not
// tried again and again); the result is still posted.
func TestFollowDeletedReply(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.hub.Comment(701, 65, "andres", "@pgbisect bisect copy-single --good A --bad B", time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC))
	d := f.dispatcher(t)
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	var replyID int64
	if err := f.st.Pool().QueryRow(ctx, "SELECT reply_id FROM github_commands WHERE comment_id = 701").Scan(&replyID); err != nil {
		t.Fatal(err)
	}
	f.hub.DeleteComment(replyID)
	id, _ := strconv.ParseInt(f.queued[0], 10, 64)
	job := app.Journal(ctx, f.st, EventsOf(id), nil, nil)
	job(app.Event{Kind: app.KindStart, Text: "bisection b3"})
	job(app.Event{Kind: app.KindDone, Error: "no such revision B"})
	if n, err := d.Follow(ctx); err != nil || n != 1 {
		t.Fatalf("follow: %d %v", n, err)
	}
	if rs := f.results(); len(rs) != 1 || !strings.Contains(rs[0], "failed: no such revision B.") {
		t.Errorf("results %q", rs)
	}
}

// TestReplyBodyFits: a reply with more milestones than a comment holds
// keeps the newest, says the oldest are left out, and fits.
func TestReplyBodyFits(t *testing.T) {
	var lines []string
	for i := range 3000 {
		lines = append(lines, fmt.Sprintf("- culprit %d: confirmed after a long and careful check", i))
	}
	progress := strings.Join(lines, "\n")
	body := replyBody("Queued as job 7.", progress)
	if len(body) > notify.MaxBody || !strings.HasPrefix(body, "Queued as job 7.\n\n- … earlier milestones left out\n") ||
		!strings.HasSuffix(body, lines[len(lines)-1]) || strings.Contains(body, lines[0]+"\n") {
		t.Errorf("%d bytes (max %d): %.200q … %q", len(body), notify.MaxBody, body, body[max(0, len(body)-100):])
	}
	if short := replyBody("Queued.", "- started"); short != "Queued.\n\n- started" {
		t.Errorf("a short reply: %q", short)
	}
}
