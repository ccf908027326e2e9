package intake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/notify/githubtest"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

const token = "ghp_intakeTOKEN"

func TestMain(m *testing.M) {
	code := m.Run()
	storetest.Close()
	os.Exit(code)
}

type fixture struct {
	hub    *githubtest.Hub
	st     *store.Store
	queued []string // job ids, in order
	fail   error    // the next Enqueue fails with it
	// pending answers Pending; nil: no job may run again.
	pending func(ctx context.Context, jobID string) (bool, error)
	// answered are the answer-only requests run, in order.
	answered []Request
}

// Enqueue implements Queue: a row of the results store's jobs table.
func (f *fixture) Enqueue(ctx context.Context, tx pgx.Tx, req Request) (string, string, error) {
	if err := f.fail; err != nil {
		f.fail = nil
		return "", "", err
	}
	kind, body, err := app.Encode(req.Request)
	if err != nil {
		return "", "", err
	}
	var id int64
	if err := tx.QueryRow(ctx, "INSERT INTO jobs (kind, args) VALUES ($1, $2) RETURNING id", kind, body).Scan(&id); err != nil {
		return "", "", err
	}
	f.queued = append(f.queued, fmt.Sprint(id))
	return fmt.Sprint(id), EventsOf(id), nil
}

// Pending implements Queue.
func (f *fixture) Pending(ctx context.Context, jobID string) (bool, error) {
	if f.pending == nil {
		return false, nil
	}
	return f.pending(ctx, jobID)
}

// Answer implements Queue, recording the request.
func (f *fixture) Answer(_ context.Context, req Request) (string, error) {
	f.answered = append(f.answered, req)
	return "idle, 0 jobs queued", nil
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{hub: githubtest.New(t, token), st: storetest.Store(t)}
	f.hub.Permissions["andres"] = "write"
	return f
}

func (f *fixture) dispatcher(t *testing.T) *Dispatcher {
	in, err := notify.NewIntake(notify.IntakeOptions{GitHubOptions: notify.GitHubOptions{Repo: "pg/bot", APIURL: f.hub.URL(),
		Labels: []string{"pgbisect"}, Token: token}, Cache: f.st})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Intake: in, Store: f.st, Commands: Commands{Scenarios: scenarios(t)}, Queue: f,
		DashboardURL: "http://bench.example.org:8080/"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// EventsOf is the events stream of the fixture's job id.
func EventsOf(id int64) string { return fmt.Sprintf("job-intake-test-%d", id) }

func (f *fixture) replies() string {
	f.hub.Lock()
	defer f.hub.Unlock()
	var out []string
	for _, b := range f.hub.Replies {
		out = append(out, b)
	}
	return strings.Join(out, "\n")
}

func TestCommandsFromComments(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	f.hub.Comment(101, 42, "andres", "Looks like COPY got slower.\n@pgbisect bisect copy-single --good A --bad B", t0)
	f.hub.Comment(102, 42, "stranger", "@pgbisect bisect copy-single --good A --bad B", t0.Add(time.Minute))
	f.hub.Comment(103, 43, "andres", "@pgbisect bisect copy-singel --good A --bad B\n@pgbisect status\n@pgbisect compare 'x", t0.Add(2*time.Minute))

	// The first poll's queueing fails (the store went away, pgbisect was
	// killed): nothing is lost, the next poll by a new dispatcher (a
	// restarted bot) queues it, once.
	f.fail = errors.New("connection lost")
	if _, err := f.dispatcher(t).Poll(ctx); err == nil {
		t.Fatal("a failed queueing was not reported")
	}
	d := f.dispatcher(t)
	acted, err := d.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.queued) != 1 || acted != 5 {
		t.Fatalf("queued %v, acted on %d commands; want one job and 5 commands", f.queued, acted)
	}
	// Polled again, and the same comment delivered by a webhook: nothing
	// more is queued or answered.
	before := len(f.hub.Replies)
	if acted, err := d.Poll(ctx); err != nil || acted != 0 {
		t.Errorf("second poll acted on %d (%v)", acted, err)
	}
	secret := []byte("hook-secret")
	deliver := func(id string, key []byte) *httptest.ResponseRecorder {
		body, _ := json.Marshal(map[string]any{"action": "created", "repository": map[string]any{"full_name": "pg/bot"},
			"issue": map[string]any{"number": 42}, "comment": map[string]any{"id": 101, "user": map[string]any{"login": "andres"},
				"body": "@pgbisect bisect copy-single --good A --bad B", "updated_at": "2026-11-30T09:00:00Z"}})
		r := httptest.NewRequest("POST", "/github/webhook", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", "issue_comment")
		r.Header.Set("X-GitHub-Delivery", id)
		mac := hmac.New(sha256.New, key)
		mac.Write(body)
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		w := httptest.NewRecorder()
		d.Webhook(secret).ServeHTTP(w, r)
		return w
	}
	for _, id := range []string{"delivery-1", "delivery-1"} {
		if w := deliver(id, secret); w.Code != http.StatusOK {
			t.Errorf("delivery %s: %d %s", id, w.Code, w.Body)
		}
	}
	if w := deliver("delivery-2", []byte("wrong")); w.Code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", w.Code)
	}
	if len(f.queued) != 1 || len(f.hub.Replies) != before {
		t.Errorf("after a repeated poll and two deliveries: jobs %v, %d replies (was %d)", f.queued, len(f.hub.Replies), before)
	}

	all := f.replies()
	for _, want := range []string{
		"@andres queued as job " + f.queued[0] + ": bisect --scenario copy-single --good A --bad B. Follow it at http://bench.example.org:8080/jobs/" + f.queued[0] + ".",
		"@stranger sorry, only users with write permission on pg/bot, or listed in the bot's github.allow, can start jobs (you have read permission on pg/bot).",
		`@andres unknown scenario "copy-singel" (did you mean copy-single?)`,
		"@andres idle, 0 jobs queued",
		`@andres I could not read that command: unclosed ' in "compare 'x": close the quote.`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no reply %q in:\n%s", want, all)
		}
	}
	if got := strings.Join(f.hub.Reactions, ","); got != "101:eyes" {
		t.Errorf("reactions %s, want 101:eyes", got)
	}
	// The bot's own replies (which the fake lists among the comments)
	// started nothing: one job, five answers.
	if len(f.hub.Replies) != 5 {
		t.Errorf("%d replies, want 5:\n%s", len(f.hub.Replies), all)
	}
}

// TestFailedDeliveryRedelivered: a webhook delivery that cannot be acted on
// (GitHub down while the author's permission is checked) is answered 503
// and not remembered, so GitHub's redelivery (the same delivery ID) queues
// the job, once. Found by the soak run (issue 33), where the redelivery was
// taken for a replay and only polling saved the command.
func TestFailedDeliveryRedelivered(t *testing.T) {
	f := newFixture(t)
	d := f.dispatcher(t)
	secret := []byte("hook-secret")
	// The package's tests share one store: a comment and a delivery of
	// this run's own (TestFollow answers comment 301; -count=N reruns),
	// written now.
	now := time.Now().UTC()
	delivery := fmt.Sprintf("redelivered-%d", now.UnixNano())
	body, _ := json.Marshal(map[string]any{"action": "created", "repository": map[string]any{"full_name": "pg/bot"},
		"issue": map[string]any{"number": 42}, "comment": map[string]any{"id": 3_000_000 + now.UnixNano()%1_000_000, "user": map[string]any{"login": "andres"},
			"body": "@pgbisect bisect copy-single --good A --bad B", "updated_at": now.Format(time.RFC3339)}})
	deliver := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/github/webhook", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", "issue_comment")
		r.Header.Set("X-GitHub-Delivery", delivery)
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		w := httptest.NewRecorder()
		d.Webhook(secret).ServeHTTP(w, r)
		return w
	}
	if _, err := d.Poll(context.Background()); err != nil { // the bot learns its login
		t.Fatal(err)
	}
	f.hub.FailUntil(time.Now().Add(time.Hour), githubtest.Status(http.StatusBadGateway, "Server Error"))
	if w := deliver(); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("delivery while GitHub is down: %d %s, want 503", w.Code, w.Body)
	}
	f.hub.FailUntil(time.Time{}, nil)
	for range 2 {
		if w := deliver(); w.Code != http.StatusOK {
			t.Errorf("redelivery: %d %s", w.Code, w.Body)
		}
	}
	if len(f.queued) != 1 || len(f.hub.Replies) != 1 {
		t.Errorf("after a failed delivery and two redeliveries: jobs %v, %d replies; want one of each:\n%s", f.queued, len(f.hub.Replies), f.replies())
	}
}

func TestRateLimitPerUser(t *testing.T) {
	f := newFixture(t)
	f.hub.Permissions["tomas"] = "admin"
	ctx := context.Background()
	d := f.dispatcher(t)
	d.o.RateLimit = 2
	t0 := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	for i := range 3 {
		f.hub.Comment(int64(200+i), 50, "tomas", "@pgbisect bisect copy-single --good A --bad B", t0.Add(time.Duration(i)*time.Minute))
	}
	if _, err := d.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.queued) != 2 || !strings.Contains(f.replies(), "@tomas you have queued 2 jobs in the last 24h0m0s, the most one user may") {
		t.Errorf("queued %v; replies:\n%s", f.queued, f.replies())
	}
}
