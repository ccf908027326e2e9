package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
	"github.com/pgbisect/pgbisect/notify/githubtest"
)

// FuzzWebhook feeds Intake.Webhook, the signed issue_comment webhook of
// 'pgbisect serve', with deliveries signed inside the target, so that the
// fuzzer gets past the signature to the payload; tamper signs with another
// key instead. Whatever the delivery: no panic, the time bounded, a
// tampered one refused with ErrBadSignature before anything is read, a
// signed one never refused for its signature, short errors, and the
// commands found are exactly those of a created or edited comment of
// pg/bot by someone other than the bot, read here independently of
// go-github.
func FuzzWebhook(f *testing.F) {
	hub := githubtest.New(f, testToken)
	in, err := NewIntake(IntakeOptions{GitHubOptions: GitHubOptions{Repo: "pg/bot", APIURL: hub.URL(),
		Labels: []string{"pgbisect"}, Token: testToken}})
	if err != nil {
		f.Fatal(err)
	}
	paths, _ := filepath.Glob("testdata/webhook/*.json")
	for i, data := range fuzztest.Seeds(f, "testdata/webhook/*.json") {
		event := "issue_comment"
		if strings.HasPrefix(filepath.Base(paths[i]), "ping") {
			event = "ping"
		}
		f.Add(data, event, false, false)
		f.Add(data, event, true, i == 0) // form-encoded, and one tampered
	}
	secret := []byte("fuzz-webhook-secret")
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, payload []byte, event string, form, tamper bool) {
		body, ctype := payload, "application/json"
		if form {
			body, ctype = []byte("payload="+url.QueryEscape(string(payload))), "application/x-www-form-urlencoded"
		}
		key := secret
		if tamper {
			key = []byte("not-the-secret")
		}
		r := httptest.NewRequest("POST", "/github/webhook", bytes.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("X-GitHub-Event", event)
		r.Header.Set("X-GitHub-Delivery", "fuzz-1")
		mac := hmac.New(sha256.New, key)
		mac.Write(body)
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))

		var delivery string
		var ms []Mention
		var err error
		fuzztest.Within(t, func() { delivery, ms, err = in.Webhook(ctx, r, secret) })
		if tamper {
			if !errors.Is(err, ErrBadSignature) || delivery != "" || ms != nil {
				t.Fatalf("a delivery signed with another key: %q %v %v, want ErrBadSignature and nothing read", delivery, ms, err)
			}
			return
		}
		if errors.Is(err, ErrBadSignature) {
			t.Fatalf("a correctly signed delivery refused: %v", err)
		}
		fuzztest.ShortError(t, err, 0)
		if err != nil {
			if ms != nil {
				t.Errorf("an error (%v) and %d commands", err, len(ms))
			}
			return
		}
		if delivery != "fuzz-1" {
			t.Errorf("delivery %q, want fuzz-1", delivery)
		}
		var want []string
		var ev struct {
			Action string `json:"action"`
			Repo   struct {
				FullName string `json:"full_name"`
			} `json:"repository"`
			Issue struct {
				Number int `json:"number"`
			} `json:"issue"`
			Comment struct {
				ID   int64  `json:"id"`
				Body string `json:"body"`
				User struct {
					Login string `json:"login"`
				} `json:"user"`
			} `json:"comment"`
		}
		if event == "issue_comment" && json.Unmarshal(payload, &ev) == nil && (ev.Action == "created" || ev.Action == "edited") &&
			strings.EqualFold(ev.Repo.FullName, "pg/bot") && !strings.EqualFold(ev.Comment.User.Login, "pgbisect-bot") {
			want = Commands(ev.Comment.Body, "@pgbisect")
		}
		var got []string
		for i, m := range ms {
			got = append(got, m.Line)
			if m.Index != i || m.CommentID != ev.Comment.ID || m.Issue != ev.Issue.Number || m.User != ev.Comment.User.Login {
				t.Errorf("command %d: %+v, from comment %d on issue %d by %q", i, m, ev.Comment.ID, ev.Issue.Number, ev.Comment.User.Login)
			}
			if args, err := SplitArgs(m.Line); !reflect.DeepEqual(args, m.Args) || (err == nil) != (m.Err == "") {
				t.Errorf("command %q: args %q (%q), split here %q (%v)", m.Line, m.Args, m.Err, args, err)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("commands %q, want %q (event %q)", got, want, event)
		}
	})
}
