package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Authentication: one token (Config.Token), two ways to show it.
//
//   - Programs send it as a bearer token (Authorization: Bearer TOKEN).
//   - People sign in once at /login with it; the answer sets two HttpOnly
//     cookies holding a session derived from the token (an HMAC of its
//     purpose and expiry, keyed by the token), so the server keeps no
//     session state, every process serving the same store with the same
//     token accepts it, and changing the token signs everyone out.
//     The read cookie is SameSite=Lax, so a link from a GitHub issue opens
//     a private dashboard's page; the write cookie is SameSite=Strict, and
//     only it (or the bearer token) authorises a write. Every POST is
//     also behind http.CrossOriginProtection.
//
// Writes always need the token. Reads need it only when Config.Private is
// set.

const (
	readCookie  = "pgbisect_session"
	writeCookie = "pgbisect_write"
	// sessionTTL is how long a sign-in lasts.
	sessionTTL = 14 * 24 * time.Hour
)

// sessionValue is the cookie value of a session for purpose ("read",
// "write") that ends at expiry: the expiry and its MAC.
func (s *Server) sessionValue(purpose string, expiry time.Time) string {
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return exp + "." + s.sessionMAC(purpose, exp)
}

func (s *Server) sessionMAC(purpose, exp string) string {
	m := hmac.New(sha256.New, []byte(s.cfg.Token))
	fmt.Fprintf(m, "pgbisect dashboard session\x00%s\x00%s", purpose, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// validSession reports whether r carries an unexpired session cookie for
// purpose.
func (s *Server) validSession(r *http.Request, name, purpose string) bool {
	c, err := r.Cookie(name)
	if err != nil || s.cfg.Token == "" {
		return false
	}
	exp, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() >= sec {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(s.sessionMAC(purpose, exp)))
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

// bearer reports whether r carries the token as a bearer token.
func (s *Server) bearer(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && s.tokenMatches(got)
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

// loginPost checks the token of the sign-in form and, when it matches,
// sets the session cookies and returns to the form's next page.
func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	next := r.PostFormValue("next")
	if s.cfg.Token == "" {
		s.loginPage(w, r, http.StatusForbidden, next, "Signing in is off: start pgbisect serve with PGBISECT_WEB_TOKEN set.")
		return
	}
	if !s.tokenMatches(r.PostFormValue("token")) {
		s.log.Warn("a failed sign-in on the dashboard", "remote", r.RemoteAddr)
		s.loginPage(w, r, http.StatusUnauthorized, next, "That is not the dashboard's token.")
		return
	}
	expiry := time.Now().Add(sessionTTL)
	secure := r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
	for _, c := range []struct {
		name, purpose string
		same          http.SameSite
	}{{readCookie, "read", http.SameSiteLaxMode}, {writeCookie, "write", http.SameSiteStrictMode}} {
		http.SetCookie(w, &http.Cookie{Name: c.name, Value: s.sessionValue(c.purpose, expiry), Path: "/", Expires: expiry,
			HttpOnly: true, Secure: secure, SameSite: c.same})
	}
	http.Redirect(w, r, localPath(next), http.StatusSeeOther)
}

// logout ends this browser's session (other browsers keep theirs until
// they expire or the token changes).
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	for _, name := range []string{readCookie, writeCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
