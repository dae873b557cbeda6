package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/netjam/netjam/control"
)

// The dashboard (netjam proxy --ui): a page under /ui/, a path
// toxiproxy's API does not have, that lists the proxies and their toxics
// and polls GET /ui/proxies for them. It only reads: the API's changes
// stay closed to browsers, as toxiproxy keeps them. Its page and script
// are embedded; its style and the script it shares with the run
// dashboard (its token form, api()) are control's; it loads nothing from
// anywhere else.
//
//go:embed ui
var uiFiles embed.FS

// uiPrefix is where the dashboard lives on the API's listener.
const uiPrefix = "/ui/"

// uiCSP: the page loads its own files only and talks to its own
// endpoint only, as the run dashboard's (control).
const uiCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Bounds of GET /ui/proxies: the first proxies by name, and each
// attribute's value cut (a trace toxic's data is up to 256 KiB).
const (
	maxUIProxies   = 200
	maxUIAttribute = 160
)

// uiFile is one of the dashboard's files: name in files.
type uiFile struct {
	files fs.FS
	name  string
}

// uiStatic are the dashboard's files by path: its page (at /ui/ itself)
// and its script are proxy's; its style and the script it shares with
// the run dashboard (its token form, api()) are control's. uiHandler
// serves these, and uiPublic lets these and nothing else through without
// the token: one list, so that the two cannot differ.
var uiStatic = map[string]uiFile{
	uiPrefix:                {ownUIFiles(), "index.html"},
	uiPrefix + "proxies.js": {ownUIFiles(), "proxies.js"},
	uiPrefix + "style.css":  {control.UIFiles(), "style.css"},
	uiPrefix + "api.js":     {control.UIFiles(), "api.js"},
}

func ownUIFiles() fs.FS {
	sub, _ := fs.Sub(uiFiles, "ui")
	return sub
}

// uiHandler serves the dashboard's page, its files and GET /ui/proxies.
func (s *Server) uiHandler() http.Handler {
	mux := http.NewServeMux()
	for path, f := range uiStatic {
		pattern := "GET " + path
		if path == uiPrefix {
			pattern += "{$}" // /ui/ alone, not the paths below it
		}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			http.ServeFileFS(w, r, f.files, f.name)
		})
	}
	mux.HandleFunc("GET /ui/proxies", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.uiState())
	})
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(404, "%s %s: the dashboard has no such path", r.Method, r.URL.Path))
	})
	return mux
}

// uiPublic reports whether path is one of the dashboard's files, which
// hold nothing secret and are served without the token: the page asks
// for it.
func uiPublic(path string) bool {
	_, ok := uiStatic[path]
	return ok
}

// uiProxy is a proxy as the dashboard shows it.
type uiProxy struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Protocol string `json:"protocol"`
	Enabled  bool   `json:"enabled"`
	Open     uint64 `json:"open"`
	Accepted uint64 `json:"accepted"`
	// Bytes each way: the client's toward the upstream (upstream), the
	// replies (downstream), as the proxy received and sent them.
	Received map[string]uint64 `json:"received"`
	Sent     map[string]uint64 `json:"sent"`
	// Refused are connections reset at once, by reason (limit,
	// upstream, path); Drops the running paths' packets dropped, by
	// direction and reason; Discarded the bytes a toxic threw away.
	Refused          map[string]uint64            `json:"refused"`
	Drops            map[string]map[string]uint64 `json:"drops"`
	Discarded        map[string]uint64            `json:"discarded"`
	DatagramsDropped uint64                       `json:"datagrams_dropped"`
	Resets           uint64                       `json:"toxic_resets"`
	Paths            int                          `json:"paths"`
	Retransmits      uint64                       `json:"tcp_retransmits"`
	Toxics           []uiToxic                    `json:"toxics"`
}

// uiToxic is a toxic as the dashboard shows it: its attributes as text,
// each cut at maxUIAttribute bytes.
type uiToxic struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Stream     string      `json:"stream"`
	Toxicity   float32     `json:"toxicity"`
	Attributes [][2]string `json:"attributes"` // [name, value], by name
}

// uiStateJSON is GET /ui/proxies's answer.
type uiStateJSON struct {
	Version string    `json:"version"`
	Proxies []uiProxy `json:"proxies"`
	// Omitted counts the proxies past maxUIProxies (by name).
	Omitted int `json:"omitted"`
}

func (s *Server) uiState() uiStateJSON {
	ps := s.sorted()
	out := uiStateJSON{Version: s.opts.Version, Proxies: []uiProxy{}}
	if len(ps) > maxUIProxies {
		out.Omitted = len(ps) - maxUIProxies
		ps = ps[:maxUIProxies]
	}
	for _, p := range ps {
		out.Proxies = append(out.Proxies, p.uiJSON())
	}
	return out
}

func (p *Proxy) uiJSON() uiProxy {
	st := p.Stats()
	j := p.json()
	u := uiProxy{Name: j.Name, Listen: j.Listen, Upstream: j.Upstream, Protocol: "tcp", Enabled: j.Enabled,
		Open: st.Open, Accepted: st.Accepted, Received: map[string]uint64{}, Sent: map[string]uint64{},
		Refused:   map[string]uint64{"limit": st.Refused, "upstream": st.UpstreamFailed, "path": st.PathFailed},
		Drops:     map[string]map[string]uint64{"uplink": {}, "downlink": {}},
		Discarded: map[string]uint64{}, DatagramsDropped: p.counts.datagramsDropped.Load(),
		Resets: st.Resets, Paths: st.Paths, Retransmits: st.Retransmits, Toxics: []uiToxic{}}
	if j.Protocol != "" {
		u.Protocol = j.Protocol
	}
	for _, d := range []direction{upstream, downstream} {
		u.Received[d.String()], u.Sent[d.String()], u.Discarded[d.String()] = st.Received[d], st.Sent[d], st.Discarded[d]
	}
	for _, links := range st.Links {
		for i, l := range links {
			if i > 1 {
				break
			}
			m := u.Drops[[]string{"uplink", "downlink"}[i]]
			for why, n := range l.Drops {
				if n > 0 {
					m[why] += n
				}
			}
		}
	}
	for _, t := range j.Toxics {
		u.Toxics = append(u.Toxics, uiToxicOf(t))
	}
	return u
}

func uiToxicOf(t *Toxic) uiToxic {
	u := uiToxic{Name: t.Name, Type: t.Type, Stream: t.dir.String(), Toxicity: t.Toxicity, Attributes: [][2]string{}}
	add := func(k, v string) {
		if len(v) > maxUIAttribute {
			v = fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(v[:maxUIAttribute], ""), len(v))
		}
		u.Attributes = append(u.Attributes, [2]string{k, v})
	}
	for k, v := range t.ints {
		add(k, fmt.Sprint(v))
	}
	for k, v := range t.raw {
		if s, ok := v.(string); ok {
			add(k, s)
			continue
		}
		b, _ := json.Marshal(v)
		add(k, string(b))
	}
	sort.Slice(u.Attributes, func(a, b int) bool { return u.Attributes[a][0] < u.Attributes[b][0] })
	return u
}

// uiCookieName is the dashboard cookie's name for the listener of r: a
// browser sends a host's cookies to each of its ports, so two servers on
// one machine each need their own.
func uiCookieName(r *http.Request) string {
	port := 0
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		port = a.Port
	}
	return fmt.Sprintf("netjam_proxy_token_%d", port)
}

// uiCookieValue is derived from the token, so that it holds only
// characters a cookie may, and is not the token itself.
func uiCookieValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("netjam proxy dashboard cookie"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// serveUI guards the dashboard as netjam's control endpoint guards its
// own: a request from another origin is refused, and so is, without a
// token, one whose Host is not a loopback name; with a token, every
// request but the page's files must carry it (Authorization: Bearer, or
// the cookie GET /ui/?token=TOKEN sets).
func (gd *guarded) serveUI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer") // the page's first URL may hold the token
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		writeError(w, errorf(403, "a request from %s: only the dashboard's own page may call it", o))
		return
	}
	if err := gd.checkHost(r); err != nil {
		writeError(w, err)
		return
	}
	if !gd.uiAuthorized(w, r) {
		if !uiPublic(r.URL.Path) {
			writeError(w, errorf(401, "missing or wrong token (Authorization: Bearer TOKEN)"))
			return
		}
		h.Set("Connection", "close") // a connection without the token gets one request
	}
	gd.ui.ServeHTTP(w, r)
}

// uiAuthorized reports whether r carries the token, setting the cookie
// when the page's URL holds it.
func (gd *guarded) uiAuthorized(w http.ResponseWriter, r *http.Request) bool {
	tok := gd.g.Token
	if tok == "" {
		return true
	}
	if got := r.Header.Get("Authorization"); got != "" {
		return equal(got, "Bearer "+tok)
	}
	name := uiCookieName(r)
	if c, err := r.Cookie(name); err == nil {
		return equal(c.Value, uiCookieValue(tok))
	}
	if r.URL.Path == uiPrefix && r.URL.Query().Has("token") {
		if !equal(r.URL.Query().Get("token"), tok) {
			return false
		}
		// HttpOnly: the page never reads it; SameSite=Strict: no other
		// site's page makes the browser send it; the dashboard's paths
		// only, for this port only (its name), for the session.
		http.SetCookie(w, &http.Cookie{Name: name, Value: uiCookieValue(tok), Path: uiPrefix,
			HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return true
	}
	return false
}

// equal compares a secret in constant time.
func equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// isUIPath reports whether path is the dashboard's.
func isUIPath(path string) bool {
	return path == "/ui" || strings.HasPrefix(path, uiPrefix)
}
