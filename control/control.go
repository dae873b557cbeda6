// Package control serves a run's control API: HTTP and JSON under /v1/, on
// a unix socket or a TCP address, for `netjam ctl`, a test's own code or
// curl. It shows the run in progress and changes its path while it runs.
//
//	GET   /v1/status   the run now: scenario, variant, elapsed time, each flow's progress, each link
//	GET   /v1/links    each direction's settings in force and counters, as summary.json has them
//	PATCH /v1/links    {"set": {"link.uplink.loss": "5%"}}: change the path now, with --set's keys
//	POST  /v1/stop     end the run as Ctrl-C would
//
// Errors are JSON, {"error": "..."}, with the scenario's own messages for
// bad keys and values (400), 401 for a missing or wrong token, 409 when no
// run is in progress. openapi.yaml, beside this file, describes it.
package control

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/netjam/netjam/emulator"
)

// Server is a control endpoint. The run it controls changes as the
// variants of a plan run one after another (Attach).
type Server struct {
	token string // "" for none (loopback and unix sockets only)
	stop  func()
	srv   *http.Server
	ln    net.Listener
	path  string // the unix socket's path, removed by Close

	mu   sync.Mutex
	live *emulator.Live
}

// maxBody bounds a request's body.
const maxBody = 64 << 10

// Listen opens the endpoint's listener for addr: "unix:PATH" (a socket only
// its owner may use, mode 0600) or "HOST:PORT". A non-loopback TCP address
// needs a token.
func Listen(addr string, haveToken bool) (net.Listener, string, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, "", errors.New("--control unix: needs a path (unix:PATH)")
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket == 0 {
			return nil, "", fmt.Errorf("--control %s: the file exists and is not a socket", addr)
		}
		os.Remove(path) // a socket left by a killed netjam
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, "", err
		}
		if err := os.Chmod(path, 0o600); err != nil {
			ln.Close()
			return nil, "", err
		}
		return ln, path, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("--control %s: expected unix:PATH or HOST:PORT (%v)", addr, err)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !haveToken {
		return nil, "", fmt.Errorf("--control %s: not a loopback address; anyone who reaches it could change the path: give --control-token FILE", addr)
	}
	ln, err := net.Listen("tcp", addr)
	return ln, "", err
}

// Serve serves the API on ln until Close. stop ends the run as Ctrl-C
// would; token, when not empty, must come with every request
// (Authorization: Bearer TOKEN). socket is ln's unix socket path, removed
// by Close.
func Serve(ln net.Listener, socket, token string, stop func()) *Server {
	s := &Server{token: token, stop: stop, ln: ln, path: socket}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/links", s.links)
	mux.HandleFunc("PATCH /v1/links", s.set)
	mux.HandleFunc("POST /v1/stop", s.doStop)
	s.srv = &http.Server{Handler: s.auth(mux), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s
}

// Attach makes live the run the endpoint controls (nil: none).
func (s *Server) Attach(live *emulator.Live) {
	s.mu.Lock()
	s.live = live
	s.mu.Unlock()
}

// Close stops serving and removes the socket.
func (s *Server) Close() error {
	err := s.srv.Close()
	if s.path != "" {
		os.Remove(s.path)
	}
	return err
}

func (s *Server) auth(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, http.StatusUnauthorized, errors.New("missing or wrong token (Authorization: Bearer TOKEN)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) current(w http.ResponseWriter) *emulator.Live {
	s.mu.Lock()
	lv := s.live
	s.mu.Unlock()
	if lv == nil {
		writeError(w, http.StatusConflict, errors.New("no run in progress"))
	}
	return lv
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if lv := s.current(w); lv != nil {
		st, err := lv.Status()
		if err != nil {
			writeError(w, http.StatusConflict, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
}

func (s *Server) links(w http.ResponseWriter, r *http.Request) {
	if lv := s.current(w); lv != nil {
		writeJSON(w, http.StatusOK, lv.Links())
	}
}

// SetRequest is PATCH /v1/links's body: dotted keys of the link, as --set
// takes them, and their values as a scenario file has them.
type SetRequest struct {
	Set map[string]string `json:"set"`
}

func (s *Server) set(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	var req SetRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body: %v (expected {\"set\": {\"link.loss\": \"5%%\"}})", err))
		return
	}
	if len(req.Set) == 0 {
		writeError(w, http.StatusBadRequest, errors.New(`body: nothing to set (expected {"set": {"link.loss": "5%"}})`))
		return
	}
	keys := make([]string, 0, len(req.Set))
	for k := range req.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sets := make([]string, len(keys))
	for i, k := range keys {
		sets[i] = k + "=" + req.Set[k]
	}
	if err := lv.Set(sets...); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, emulator.ErrRunEnded) {
			code = http.StatusConflict
		}
		writeError(w, code, err)
		return
	}
	writeJSON(w, http.StatusOK, lv.Links())
}

func (s *Server) doStop(w http.ResponseWriter, r *http.Request) {
	s.stop()
	writeJSON(w, http.StatusOK, map[string]string{"status": "stopping"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// DefaultSocket is the socket of a bare --control: in the run's output
// folder.
func DefaultSocket(outDir string) string { return "unix:" + filepath.Join(outDir, "control.sock") }
