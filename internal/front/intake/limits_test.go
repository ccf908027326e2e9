package intake

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/notify"
)

// The package's tests share one results store (its cursor, its commands):
// these use comment IDs and logins of their own, and comments written at
// later(), after any other test's.

var lastAt time.Time

// later is a time after now and after every earlier later(): a comment
// written then is past the shared cursor.
func later() time.Time {
	t := time.Now().UTC()
	if !t.After(lastAt) {
		t = lastAt.Add(time.Second)
	}
	lastAt = t.Add(time.Minute)
	return t
}

// TestCommentOfManyCommands: one comment of 3,000 command lines costs at
// most MaxCommandsPerComment answers and one refusal of the rest, from a
// user who may give commands; from one who may not, whose lines are
// malformed too, it costs one refusal, answered only after the permission
// check.
func TestCommentOfManyCommands(t *testing.T) {
	f := newFixture(t)
	f.hub.Permissions["flood-writer"] = "write"
	d := f.dispatcher(t)
	ctx := context.Background()
	if _, err := d.Poll(ctx); err != nil { // the bot learns its login
		t.Fatal(err)
	}
	now := later()
	f.hub.Comment(36_001, 360, "flood-writer", strings.Repeat("@pgbisect status\n", 3000), now)
	f.hub.Comment(36_002, 360, "flood-reader", strings.Repeat("@pgbisect compare 'x\n", 3000), now.Add(time.Second))
	f.hub.TakeCalls()
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	calls := f.hub.TakeCalls()
	var writer, reader []string
	for _, r := range f.hub.Replies {
		switch {
		case strings.HasPrefix(r, "@flood-writer "):
			writer = append(writer, r)
		case strings.HasPrefix(r, "@flood-reader "):
			reader = append(reader, r)
		}
	}
	if n := notify.MaxCommandsPerComment; len(f.answered) != n || len(writer) != n+1 ||
		!strings.Contains(strings.Join(writer, "\n"), fmt.Sprintf("at most %d commands from one comment: the %d after them were not acted on", n, 3000-n)) {
		t.Errorf("the writer's comment: %d answered, replies:\n%s", len(f.answered), strings.Join(writer, "\n"))
	}
	if len(reader) != 1 || !strings.Contains(reader[0], "sorry, only users with write permission") {
		t.Errorf("the reader's comment: replies:\n%s", strings.Join(reader, "\n"))
	}
	// A permission check, and a reply or not, per command taken: the
	// writer's 5 and the one refusing the rest, the reader's as many.
	if len(calls) > 30 {
		t.Errorf("%d API calls for two comments:\n%s", len(calls), strings.Join(calls[:30], "\n"))
	}
}

// TestCommandLimitPerHour: every command a user gives counts against the
// hourly limit (30 by default), status and cancel too; past it the bot
// answers once, then is silent.
func TestCommandLimitPerHour(t *testing.T) {
	f := newFixture(t)
	f.hub.Permissions["busy-writer"] = "write"
	d := f.dispatcher(t)
	ctx := context.Background()
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	now := later()
	for i := range 7 {
		f.hub.Comment(int64(36_100+i), 361, "busy-writer", strings.Repeat("@pgbisect status\n", 4)+"@pgbisect cancel 1", now.Add(time.Duration(i)*time.Second))
	}
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	var replies []string
	for _, r := range f.hub.Replies {
		if strings.HasPrefix(r, "@busy-writer ") {
			replies = append(replies, r)
		}
	}
	limited := 0
	for _, r := range replies {
		if strings.Contains(r, "you have given 30 commands in the last hour") {
			limited++
		}
	}
	// 30 commands answered (statuses, and cancels refused: job 1 is not
	// the writer's), then one refusal, then silence.
	if len(replies) != 31 || limited != 1 {
		t.Errorf("%d replies, %d of them the limit's, want 31 and 1:\n%s", len(replies), limited, strings.Join(replies, "\n"))
	}
}

// TestCancelOnlyOwnJobs: a commenter with write permission cancels the
// jobs their own comments queued and no other's (nor a nightly pass, which
// no comment queues); a maintainer (maintain or admin permission) cancels
// any.
func TestCancelOnlyOwnJobs(t *testing.T) {
	f := newFixture(t)
	// The fake keys permissions by login as written; GitHub ignores case.
	for login, p := range map[string]string{"cancel-alice": "write", "cancel-Alice": "write", "cancel-bob": "write", "cancel-mia": "maintain", "cancel-root": "admin"} {
		f.hub.Permissions[login] = p
	}
	d := f.dispatcher(t)
	ctx := context.Background()
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	now := later()
	f.hub.Comment(36_200, 362, "cancel-alice", "@pgbisect bisect copy-single --good A --bad B", now)
	if _, err := d.Poll(ctx); err != nil || len(f.queued) != 1 {
		t.Fatalf("alice's bisect: queued %v (%v)", f.queued, err)
	}
	job := f.queued[0]
	const nightly = "987654321" // a job no comment queued
	for i, c := range []struct {
		who, job string
		ok       bool
	}{
		{"cancel-bob", job, false},
		{"cancel-alice", nightly, false},
		{"cancel-Alice", job, true}, // GitHub's logins ignore case
		{"cancel-mia", job, true},
		{"cancel-mia", nightly, true},
		{"cancel-root", nightly, true},
	} {
		f.answered = nil
		f.hub.Comment(int64(36_201+i), 362, c.who, "@pgbisect cancel "+c.job, now.Add(time.Duration(i+1)*time.Second))
		if _, err := d.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		ran := len(f.answered) == 1 && f.answered[0].Kind == "cancel" && fmt.Sprint(f.answered[0].Job) == c.job
		refused := strings.Contains(f.replies(), fmt.Sprintf("@%s job %s was not queued by a comment of yours", c.who, c.job))
		if ran != c.ok || refused == c.ok {
			t.Errorf("%s cancels job %s: cancelled %v, refused %v; want cancelled %v; replies:\n%s", c.who, c.job, ran, refused, c.ok, f.replies())
		}
	}
}
