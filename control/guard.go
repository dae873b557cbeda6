package control

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Endpoint is how a listener of the endpoint is guarded.
type Endpoint struct {
	// Token, when not empty, must come with every request but the
	// dashboard's files: "Authorization: Bearer TOKEN", or the
	// dashboard's cookie, which GET /?token=TOKEN sets. An endpoint
	// without one answers loopback names only (a TCP address), or its
	// owner only (a unix socket, mode 0600).
	Token string
	// TLS, when not nil, serves HTTPS: for an address others reach, so
	// that the token does not cross the network in clear.
	TLS *tls.Config
}

// NewToken is a token for an endpoint that was given none: 128 random
// bits, as printable characters a URL and a cookie carry unchanged.
func NewToken() string { return rand.Text() }

// The Content-Security-Policy of each kind of answer. No page of another
// site may frame any of them (frame-ancestors, and X-Frame-Options for
// browsers without CSP): a page that framed the dashboard could trick a
// click on its Stop.
const (
	// apiCSP: JSON and metrics, which load nothing.
	apiCSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	// uiCSP: the dashboard loads its own files only, and talks to its
	// own endpoint only.
	uiCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	// resultsCSP: the report is one page with its style inline and its
	// plots as data: URIs; nothing of the output folder runs a script
	// (sandbox), whatever a file there holds.
	resultsCSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; sandbox"
)

// guard is what a listener of the endpoint does before its handlers:
// the headers every answer carries, the checks of the request's origin
// and token, the connection's admission (gate), and closing the
// connection after an error.
type guard struct {
	ep     Endpoint
	g      *gate
	tcp    bool   // a TCP listener: browsers reach it
	cookie string // the dashboard cookie's name: netjam_token_PORT
	// cookieValue is the cookie's value: derived from the token, so
	// that it holds only characters a cookie may (a token's file may
	// hold any), and is not the token itself.
	cookieValue string
	next        http.Handler
}

func newGuard(ln net.Listener, g *gate, ep Endpoint, next http.Handler) *guard {
	gd := &guard{ep: ep, g: g, next: next}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		gd.tcp = true
		gd.cookie = cookieName(ta.Port, ep.TLS != nil)
	}
	if ep.Token != "" {
		m := hmac.New(sha256.New, []byte(ep.Token))
		m.Write([]byte("netjam dashboard cookie"))
		gd.cookieValue = base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	return gd
}

// cookieName is the dashboard cookie's name on port: a browser sends a
// host's cookies to each of its ports, so two runs' dashboards on one
// machine each need their own. Over TLS it takes the __Host- prefix (the
// browser keeps it to this host, secure, for every path).
func cookieName(port int, secure bool) string {
	if secure {
		return fmt.Sprintf("__Host-netjam_token_%d", port)
	}
	return fmt.Sprintf("netjam_token_%d", port)
}

// public reports whether path is one of the dashboard's files, which hold
// nothing secret and are served without the token: the page asks for it.
func public(path string) bool { return path == "/" || strings.HasPrefix(path, "/ui/") }

func (gd *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", apiCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// The dashboard's first URL holds the token: no Referer carries it.
	h.Set("Referrer-Policy", "no-referrer")
	w = &closingWriter{w}
	if err := gd.sameOrigin(r); err != nil {
		writeError(w, http.StatusForbidden, err)
		return
	}
	if !gd.authorized(w, r) {
		if !public(r.URL.Path) {
			writeError(w, http.StatusUnauthorized, errors.New("missing or wrong token (Authorization: Bearer TOKEN)"))
			return
		}
		// A connection without the token gets one request.
		h.Set("Connection", "close")
		gd.next.ServeHTTP(w, r)
		return
	}
	if c := connOf(r); c != nil && !gd.g.admit(c) {
		h.Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, fmt.Errorf("the endpoint serves %d connections at once, and all are busy: retry later", maxConns))
		return
	}
	gd.next.ServeHTTP(w, r)
}

// authorized reports whether r carries the token: in its Authorization
// header, in the dashboard's cookie, or, for the dashboard's page, in
// its URL (GET /?token=TOKEN, the URL netjam prints), which then sets the
// cookie.
func (gd *guard) authorized(w http.ResponseWriter, r *http.Request) bool {
	if gd.ep.Token == "" {
		return true
	}
	if got := r.Header.Get("Authorization"); got != "" {
		return equal(got, "Bearer "+gd.ep.Token)
	}
	if c, err := r.Cookie(gd.cookie); err == nil && gd.cookie != "" {
		return equal(c.Value, gd.cookieValue)
	}
	if r.URL.Path == "/" && r.URL.Query().Has("token") && gd.tcp {
		if !equal(r.URL.Query().Get("token"), gd.ep.Token) {
			return false
		}
		// HttpOnly: the page never reads it (its requests carry it);
		// SameSite=Strict: no other site's page makes the browser
		// send it; a session cookie, for this port only (its name).
		http.SetCookie(w, &http.Cookie{Name: gd.cookie, Value: gd.cookieValue, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: gd.ep.TLS != nil})
		return true
	}
	return false
}

// equal compares a secret in constant time.
func equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sameOrigin refuses what a web page of another origin could make a
// browser send to the endpoint: a request whose Origin is not the
// endpoint's own (a form's POST /v1/stop from any site), and, on a
// loopback endpoint without a token, one whose Host is not a loopback
// name, an address the browser resolved by DNS rebinding. Clients other
// than browsers (curl, netjam ctl) send no Origin, and the Host they
// were given.
func (gd *guard) sameOrigin(r *http.Request) error {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	if o := r.Header.Get("Origin"); o != "" && o != scheme+r.Host {
		return fmt.Errorf("a request from %s: only the endpoint's own pages may call it", o)
	}
	if gd.ep.Token == "" && gd.tcp {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !loopbackHost(host) {
			return fmt.Errorf("host %q: a loopback endpoint answers to a loopback name or address only", r.Host)
		}
	}
	return nil
}

// closingWriter closes the connection after an answer of 400 or more: a
// client that got an error does not keep the connection for nothing.
type closingWriter struct{ http.ResponseWriter }

func (w *closingWriter) WriteHeader(code int) {
	if code >= 400 {
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Flush flushes what was written (the event stream's events).
func (w *closingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is the ResponseWriter underneath, for http.ResponseController.
func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
