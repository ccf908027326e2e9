package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestGitHubIntakeRecords(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()

	if _, _, ok, err := s.ETag(ctx, "api/repos/pg/bot/issues/comments"); ok || err != nil {
		t.Fatalf("empty cache: %v %v", ok, err)
	}
	for _, e := range []string{`"a"`, `"b"`} {
		if err := s.PutETag(ctx, "api/repos/pg/bot/issues/comments", e, []byte("[]"+e)); err != nil {
			t.Fatal(err)
		}
	}
	if etag, body, ok, err := s.ETag(ctx, "api/repos/pg/bot/issues/comments"); !ok || err != nil || etag != `"b"` || string(body) != `[]"b"` {
		t.Errorf("ETag = %q %q %v %v", etag, body, ok, err)
	}

	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if c, err := s.CommentCursor(ctx, "pg/bot"); err != nil || !c.IsZero() {
		t.Fatalf("first cursor %v %v", c, err)
	}
	s.SetCommentCursor(ctx, "pg/bot", t0.Add(time.Hour))
	s.SetCommentCursor(ctx, "pg/bot", t0) // never back
	if c, _ := s.CommentCursor(ctx, "pg/bot"); !c.Equal(t0.Add(time.Hour)) {
		t.Errorf("cursor %v, want %v", c, t0.Add(time.Hour))
	}

	// A command queues its job once, however often it is seen.
	cmd := GitHubCommand{CommentID: 7, Repo: "pg/bot", Issue: 42, Login: "andres", Command: "bisect x --good A --bad B", Outcome: "queued"}
	queued := 0
	queue := func(tx pgx.Tx) (string, string, error) {
		queued++
		var id string
		err := tx.QueryRow(ctx, "SELECT 'job-' || $1::text", fmt.Sprint(queued)).Scan(&id)
		return id, "events-" + id, err
	}
	id, err := s.TakeCommand(ctx, cmd, queue)
	if err != nil || id != "job-1" {
		t.Fatalf("first take: %q %v", id, err)
	}
	if _, err := s.TakeCommand(ctx, cmd, queue); !errors.Is(err, ErrCommandSeen) || queued != 1 {
		t.Errorf("second take: %v, queued %d times", err, queued)
	}
	// A queueing that fails records nothing: the next poll tries again.
	failing := GitHubCommand{CommentID: 8, Repo: "pg/bot", Issue: 42, Login: "andres", Command: "compare x A B", Outcome: "queued"}
	if _, err := s.TakeCommand(ctx, failing, func(pgx.Tx) (string, string, error) { return "", "", errors.New("queue down") }); err == nil {
		t.Error("a failed queueing was not reported")
	}
	if _, err := s.TakeCommand(ctx, failing, queue); err != nil {
		t.Errorf("retry after a failed queueing: %v", err)
	}
	// An answer only (a refusal) is recorded too, and counts no job.
	if _, err := s.TakeCommand(ctx, GitHubCommand{CommentID: 9, Repo: "pg/bot", Issue: 1, Login: "andres", Command: "status", Outcome: "answered"}, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.JobsRequestedSince(ctx, "andres", t0.Add(-24*time.Hour)); err != nil || n != 2 {
		t.Errorf("andres asked for %d jobs (%v), want 2", n, err)
	}
	// The hourly limit counts every command, the answers too.
	if n, err := s.CommandsSince(ctx, "andres", time.Now().Add(-time.Hour)); err != nil || n != 3 {
		t.Errorf("andres gave %d commands in the last hour (%v), want 3", n, err)
	}
	if n, err := s.CommandsSince(ctx, "andres", time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("andres gave %d commands after the next hour (%v)", n, err)
	}
	// A job is found by the command that queued it; one no command
	// queued (a nightly pass) is nobody's.
	if who, err := s.JobQueuedBy(ctx, "pg/bot", "job-1"); err != nil || who != "andres" {
		t.Errorf("job-1 queued by %q (%v), want andres", who, err)
	}
	if who, err := s.JobQueuedBy(ctx, "pg/other", "job-1"); err != nil || who != "" {
		t.Errorf("job-1 of another repository queued by %q (%v)", who, err)
	}
	if who, err := s.JobQueuedBy(ctx, "pg/bot", "job-99"); err != nil || who != "" {
		t.Errorf("job-99 queued by %q (%v)", who, err)
	}

	if seen, err := s.SeenDelivery(ctx, "d-1"); seen || err != nil {
		t.Errorf("first delivery: %v %v", seen, err)
	}
	if seen, err := s.SeenDelivery(ctx, "d-1"); !seen || err != nil {
		t.Errorf("replayed delivery: %v %v", seen, err)
	}
	if err := s.ForgetDelivery(ctx, "d-1"); err != nil {
		t.Fatal(err)
	}
	if seen, err := s.SeenDelivery(ctx, "d-1"); seen || err != nil {
		t.Errorf("delivery redelivered after it was forgotten: %v %v", seen, err)
	}
}

func TestGitHubAnswerProgress(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	queue := func(pgx.Tx) (string, string, error) { return "17", "job-bisect-abc", nil }
	cmd := GitHubCommand{CommentID: 70, Repo: "pg/bot", Issue: 4, Login: "andres", Command: "bisect x", Outcome: "queued"}
	if _, err := s.TakeCommand(ctx, cmd, queue); err != nil {
		t.Fatal(err)
	}
	// Not followed until the reply is known.
	if as, err := s.OpenAnswers(ctx, "pg/bot", time.Hour); err != nil || len(as) != 0 {
		t.Fatalf("answers before the reply: %v %v", as, err)
	}
	if err := s.SetReply(ctx, 70, 0, 5001, "queued as job 17"); err != nil {
		t.Fatal(err)
	}
	as, err := s.OpenAnswers(ctx, "pg/bot", time.Hour)
	if err != nil || len(as) != 1 {
		t.Fatalf("answers: %v %v", as, err)
	}
	a := as[0]
	if a.JobID != "17" || a.Events != "job-bisect-abc" || a.ReplyID != 5001 || a.Reply != "queued as job 17" || a.Issue != 4 {
		t.Errorf("answer %+v", a)
	}
	a.ProgressSeq, a.Progress = 12, "- endpoints verified"
	if err := s.SaveProgress(ctx, a, false); err != nil {
		t.Fatal(err)
	}
	as, _ = s.OpenAnswers(ctx, "pg/bot", time.Hour)
	if len(as) != 1 || as[0].ProgressSeq != 12 || as[0].Progress != "- endpoints verified" || as[0].FinalID != 0 {
		t.Errorf("after progress: %+v", as)
	}
	a.FinalID = 5002
	if err := s.SaveProgress(ctx, a, true); err != nil {
		t.Fatal(err)
	}
	if as, _ := s.OpenAnswers(ctx, "pg/bot", time.Hour); len(as) != 0 {
		t.Errorf("a closed answer is still followed: %+v", as)
	}
}
