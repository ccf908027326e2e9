package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Authentication: one token (Config.Token), two ways to show it.
//
//   - Programs send it as a bearer token (Authorization: Bearer TOKEN).
//   - People sign in once at /login with it; the answer sets two HttpOnly
//     cookies, each holding a random session id that this server keeps in
//     memory (sessions), so signing out ends the session on the server, not
//     only in the browser, and a restart or a changed token signs everyone
//     out. The read cookie is SameSite=Lax, so a link from a GitHub issue
//     opens a private dashboard's page; the write cookie is SameSite=Strict,
//     and only it (or the bearer token) authorises a write. Every POST is
//     also behind http.CrossOriginProtection.
//
// A wrong token, at /login or as a bearer token, costs the client (its
// address, see clientOf) one try of a small bucket (guesses); with the
// bucket empty, its attempts are refused with 429 before the token is
// looked at.
//
// Writes always need the token. Reads need it only when Config.Private is
// set.

const (
	readCookie  = "pgbisect_session"
	writeCookie = "pgbisect_write"
	// sessionTTL is how long a sign-in lasts.
	sessionTTL = 24 * time.Hour
	// maxSessions bounds the sessions kept; signing in beyond it ends the
	// session that would end first.
	maxSessions = 1000
)

// session is one cookie's server-side record.
type session struct {
	purpose string // "read" or "write"
	expiry  time.Time
	// login is shared by the cookies of one sign-in, which sign out together.
	login [16]byte
}

// sessions are the live sessions, by the SHA-256 of the cookie value (so a
// map lookup's timing says nothing about a valid value).
type sessions struct {
	mu sync.Mutex
	m  map[[32]byte]session
}

// add records a session for purpose of sign-in login until expiry and
// returns its cookie value.
func (ss *sessions) add(purpose string, expiry time.Time, login [16]byte) string {
	var b [32]byte
	rand.Read(b[:]) //nolint:errcheck // never fails (crypto/rand)
	v := hex.EncodeToString(b[:])
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[[32]byte]session{}
	}
	if len(ss.m) >= maxSessions {
		now := time.Now()
		var first [32]byte
		var firstExp time.Time
		for k, s := range ss.m {
			if !now.Before(s.expiry) {
				delete(ss.m, k)
			} else if firstExp.IsZero() || s.expiry.Before(firstExp) {
				first, firstExp = k, s.expiry
			}
		}
		if len(ss.m) >= maxSessions {
			delete(ss.m, first)
		}
	}
	ss.m[sha256.Sum256([]byte(v))] = session{purpose: purpose, expiry: expiry, login: login}
	return v
}

// valid reports whether value is a live session for purpose.
func (ss *sessions) valid(value, purpose string) bool {
	if value == "" {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[sha256.Sum256([]byte(value))]
	return ok && s.purpose == purpose && time.Now().Before(s.expiry)
}

// end ends the sign-ins that the cookie values belong to, every cookie of
// them.
func (ss *sessions) end(values ...string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ended := map[[16]byte]bool{}
	for _, v := range values {
		if s, ok := ss.m[sha256.Sum256([]byte(v))]; ok {
			ended[s.login] = true
		}
	}
	for k, s := range ss.m {
		if ended[s.login] || !time.Now().Before(s.expiry) {
			delete(ss.m, k)
		}
	}
}

// sessionValue starts a session for purpose ("read", "write") that ends at
// expiry, and returns its cookie value.
func (s *Server) sessionValue(purpose string, expiry time.Time) string {
	var login [16]byte
	rand.Read(login[:]) //nolint:errcheck // never fails (crypto/rand)
	return s.sessions.add(purpose, expiry, login)
}

// validSession reports whether r carries a live session cookie for
// purpose.
func (s *Server) validSession(r *http.Request, name, purpose string) bool {
	c, err := r.Cookie(name)
	if err != nil || s.cfg.Token == "" {
		return false
	}
	return s.sessions.valid(c.Value, purpose)
}

// tokenMatches compares a presented token with Config.Token in constant
// time (hashes of equal length, so not even the token's length leaks).
func (s *Server) tokenMatches(got string) bool {
	if got == "" || s.cfg.Token == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.cfg.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// bearerToken is the bearer token r carries, if any.
func bearerToken(r *http.Request) (string, bool) {
	return strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// bearer reports whether r carries the token as a bearer token.
func (s *Server) bearer(r *http.Request) bool {
	got, ok := bearerToken(r)
	return ok && s.tokenMatches(got)
}

// checkBearer counts a wrong bearer token against its client, and refuses
// (true, with 429) a request carrying one from a client out of guesses.
func (s *Server) checkBearer(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := bearerToken(r); !ok {
		return false
	}
	client := clientOf(r)
	if wait := s.guesses.wait(client); wait > 0 {
		s.tooManyGuesses(w, wait)
		return true
	}
	if !s.bearer(r) {
		s.guesses.miss(client)
	}
	return false
}

// tooManyGuesses answers a client out of guesses.
func (s *Server) tooManyGuesses(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
	http.Error(w, "too many wrong tokens from this address: try again later", http.StatusTooManyRequests)
}

// canWrite reports whether r may queue work: the bearer token or the
// write session.
func (s *Server) canWrite(r *http.Request) bool {
	return s.bearer(r) || s.validSession(r, writeCookie, "write")
}

// canRead reports whether r may read: anyone on a public dashboard, else
// the bearer token or a session.
func (s *Server) canRead(r *http.Request) bool {
	return !s.cfg.Private || s.bearer(r) || s.validSession(r, readCookie, "read") || s.validSession(r, writeCookie, "write")
}

// signedIn reports whether r comes from a browser with a session.
func (s *Server) signedIn(r *http.Request) bool {
	return s.validSession(r, readCookie, "read")
}

// alwaysOpen lists what a private dashboard serves without the token: the
// sign-in page and what it loads, and GitHub's webhook, which checks its
// own signature.
func alwaysOpen(path string) bool {
	return path == "/login" || path == "/favicon.ico" || strings.HasPrefix(path, "/static/") || path == "/github/webhook"
}

// private refuses every request to a private dashboard that does not
// carry the token, with a 401: a page answers with the sign-in form,
// anything else (the API, /metrics, event streams) with a short error.
func (s *Server) private(w http.ResponseWriter, r *http.Request) bool {
	if alwaysOpen(r.URL.Path) || s.canRead(r) {
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="pgbisect"`)
	if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/metrics" && !strings.HasPrefix(r.URL.Path, "/events/") {
		s.loginPage(w, r, http.StatusUnauthorized, r.URL.RequestURI(), "This dashboard is private: sign in with its token.")
		return true
	}
	err := errors.New("this dashboard is private: send Authorization: Bearer TOKEN (the PGBISECT_WEB_TOKEN of the server), or sign in at /login")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		s.fail(w, r, http.StatusUnauthorized, err) // as JSON
	} else {
		http.Error(w, err.Error(), http.StatusUnauthorized)
	}
	return true
}

// localPath returns next when it is a path on this server, else "/": the
// sign-in form redirects only there.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

// loginPage shows the sign-in form, which returns to next.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	s.render(w, r, status, "login", "Sign in", struct {
		Next, Message string
		Enabled       bool
	}{localPath(next), msg, s.cfg.Token != ""})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	s.loginPage(w, r, http.StatusOK, r.URL.Query().Get("next"), "")
}

// secureCookies reports whether the session cookies of r's answer are
// Secure: when r came over TLS, or when Config.PublicURL says the
// dashboard is reached over https (through a proxy that ends TLS). A
// client's X-Forwarded-Proto is not believed.
func (s *Server) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(s.cfg.PublicURL), "https://")
}

// loginPost checks the token of the sign-in form and, when it matches,
// sets the session cookies and returns to the form's next page.
func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	next := r.PostFormValue("next")
	if s.cfg.Token == "" {
		s.loginPage(w, r, http.StatusForbidden, next, "Signing in is off: start pgbisect serve with PGBISECT_WEB_TOKEN set.")
		return
	}
	client := clientOf(r)
	if wait := s.guesses.wait(client); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		s.loginPage(w, r, http.StatusTooManyRequests, next, fmt.Sprintf("Too many wrong tokens from your address: try again in %d seconds.", int(wait.Seconds())+1))
		return
	}
	if !s.tokenMatches(r.PostFormValue("token")) {
		s.guesses.miss(client)
		s.log.Warn("a failed sign-in on the dashboard", "remote", r.RemoteAddr)
		s.loginPage(w, r, http.StatusUnauthorized, next, "That is not the dashboard's token.")
		return
	}
	expiry := time.Now().Add(sessionTTL)
	var login [16]byte
	rand.Read(login[:]) //nolint:errcheck // never fails (crypto/rand)
	for _, c := range []struct {
		name, purpose string
		same          http.SameSite
	}{{readCookie, "read", http.SameSiteLaxMode}, {writeCookie, "write", http.SameSiteStrictMode}} {
		http.SetCookie(w, &http.Cookie{Name: c.name, Value: s.sessions.add(c.purpose, expiry, login), Path: "/", Expires: expiry,
			HttpOnly: true, Secure: s.secureCookies(r), SameSite: c.same})
	}
	http.Redirect(w, r, localPath(next), http.StatusSeeOther)
}

// logout ends this browser's session, on the server too: its cookies no
// longer work, even if they were copied.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	var values []string
	for _, name := range []string{readCookie, writeCookie} {
		if c, err := r.Cookie(name); err == nil {
			values = append(values, c.Value)
		}
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secureCookies(r), SameSite: http.SameSiteStrictMode})
	}
	s.sessions.end(values...)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
