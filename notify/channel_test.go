package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// listChannel is a channel other than GitHub: it keeps each post as a
// line (a mailing list's messages, say), and fails the targets in fail.
type listChannel struct {
	lines []string
	fail  map[string]bool
}

func (c *listChannel) Name() string { return "list" }

func (c *listChannel) PostFinding(ctx context.Context, f *finding.Finding, done []finding.Post, record func(finding.Post) error) ([]finding.Post, error) {
	var made []finding.Post
	for _, t := range Remaining(f, done) {
		if c.fail[t.Key] {
			return made, fmt.Errorf("posting %s: %w", t.Key, errors.ErrUnsupported)
		}
		c.lines = append(c.lines, f.ID+" "+t.Key)
		p := finding.Post{Key: t.Key, Action: finding.ActionCreated, Note: "message " + fmt.Sprint(len(c.lines))}
		made = append(made, p)
		if err := record(p); err != nil {
			return made, err
		}
	}
	return made, nil
}

func (c *listChannel) UpdateFinding(ctx context.Context, f *finding.Finding, posts []finding.Post) ([]finding.Post, error) {
	return nil, nil
}

// TestDeliverThroughAnyChannel: Deliver drains the outbox through a
// channel that is not GitHub as it does through GitHub: every target of
// every pending finding once, each post recorded; a target that fails
// stays pending and the other findings still go out; a second delivery
// posts nothing again.
func TestDeliverThroughAnyChannel(t *testing.T) {
	two, improved := twoCulprits(), improvement()
	out := outboxWith(t, two, improved)
	targets := Targets(two)
	ch := &listChannel{fail: map[string]bool{targets[1].Key: true}}
	d, err := Deliver(context.Background(), ch, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Failed) != 1 || len(d.Posts) != len(ch.lines) || len(ch.lines) != 1+len(Targets(improved)) {
		t.Fatalf("delivery %+v, lines %q", d, ch.lines)
	}
	if got := pending(t, out); strings.Join(got, ",") != two.ID {
		t.Errorf("pending %v, want %s alone (its failed target)", got, two.ID)
	}
	ch.fail = nil
	if d, err := Deliver(context.Background(), ch, out); err != nil || len(d.Posts) != 1 || len(d.Failed) != 0 {
		t.Errorf("second delivery: %+v %v, want the failed target alone", d, err)
	}
	if d, err := Deliver(context.Background(), ch, out); err != nil || len(d.Posts) != 0 || len(pending(t, out)) != 0 {
		t.Errorf("third delivery: %+v %v, want nothing to post", d, err)
	}
}
