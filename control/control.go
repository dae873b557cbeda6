// Package control serves a run's control API: HTTP and JSON under /v1/, on
// a unix socket or a TCP address, for `netjam ctl`, a test's own code or
// curl. It shows the run in progress and changes its path while it runs.
//
//	GET   /v1/status   the run now: scenario, variant, elapsed time, each flow's progress, each link
//	GET   /v1/links    each direction's settings in force and counters, as summary.json has them
//	PATCH /v1/links    {"set": {"link.uplink.loss": "5%"}}: change the path now, with --set's keys
//	POST  /v1/timeline {"at": "5s", "set": {...}}: the same change at a time of the run ahead
//	POST  /v1/reset    every key changed back to the scenario's value
//	POST  /v1/partition {"groups": [["a"], ["b", "c"]], "one_way": false}: partition the
//	                   run's nodes now, as a timeline's partition entry does
//	POST  /v1/heal     end the partition in force
//	POST  /v1/stop     end the run as Ctrl-C would
//	GET   /v1/events   Server-Sent Events: a sample of the time series each interval, each
//	                   change of the path, the run's start and end, the results written;
//	                   ?after=SEQ: those after the run up to SEQ (the two below)
//	GET   /v1/series   the run's time series from its start, in bounded memory (series.go)
//	GET   /v1/timeline the run's start, changes (a ramp's as one), end and results, from
//	                   its start (runlog.go)
//	GET   /            the dashboard: a page that plots the events and changes the path
//	                   (/?token=TOKEN, the URL netjam prints, sets its cookie)
//	GET   /metrics     Prometheus metrics of the run: each direction's packets, bytes,
//	                   drops by reason and settings in force, each flow's progress
//
// Errors are JSON, {"error": "..."}, with the scenario's own messages for
// bad keys and values (400), 401 for a missing or wrong token, 404 and
// 405 for a path or method the API does not have, 409 when no run is in
// progress, 413 for a body over 64 KiB, 429 past the changes a run may
// make or the connections the endpoint serves at once (gate.go); each
// closes its connection. openapi.yaml, beside this file, describes it.
//
// Who may use it: a unix socket's owner (socket.go), or a client with the
// endpoint's token (guard.go), whose connections clients without it cannot
// crowd out (gate.go).
package control

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/wifi"
)

// Server is a control endpoint. The run it controls changes as the
// variants of a plan run one after another (Attach).
type Server struct {
	stop func()
	srv  *http.Server // nil with ServeMetrics alone
	ln   net.Listener // the API's (a unix socket's removes it when closed)
	tls  bool         // the API's is HTTPS
	// metrics serves /metrics on an address of its own (ServeMetrics).
	metrics *http.Server
	hub     *hub
	slots   snapshotSlots // GET /v1/series and /v1/timeline's answers being made
	done    chan struct{} // closed by Close: ends the event streams
	reg     *prometheus.Registry
	// gates are the listeners' (the API's, the metrics'), whose counts
	// the metrics export; set before serving, read by Collect.
	gates []*gate

	mu   sync.Mutex
	live Run
	// results is the run's output folder once its results are written
	// (Finished), opened as a root: what is served from it stays in it.
	results    *os.Root
	resultsErr error // why results is nil after Finished

	quit     chan struct{} // closed by POST /v1/stop once the results are written
	quitOnce sync.Once

	closeOnce sync.Once
}

// maxBody bounds a request's body.
const maxBody = 64 << 10

// ListenOptions are Listen's.
type ListenOptions struct {
	// HasToken tells that the endpoint will have a token: a non-loopback
	// TCP address needs one.
	HasToken bool
	// Owner, when not nil, owns a unix socket: the invoking user of a
	// shell run under sudo, whose command uses the socket.
	Owner *Owner
}

// Listen opens the endpoint's listener for addr: "unix:PATH" (a socket only
// its owner may use, mode 0600 from the start, see socket.go; a stale
// socket there is replaced, a live one refused) or "HOST:PORT".
func Listen(addr string, o ListenOptions) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, errors.New("--control unix: needs a path (unix:PATH)")
		}
		ln, err := listenUnix(path, o.Owner)
		if err != nil {
			return nil, fmt.Errorf("--control %s: %w", addr, err)
		}
		return ln, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--control %s: expected unix:PATH or HOST:PORT (%v)", addr, err)
	}
	if !loopbackHost(host) && !o.HasToken {
		return nil, fmt.Errorf("--control %s: not a loopback address; anyone who reaches it could change the path: give --control-token FILE", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--control %s: %w", addr, err)
	}
	return ln, nil
}

// loopbackHost reports whether host (an address or a name) is this
// machine's loopback: a loopback address, or localhost.
func loopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// ListenMetrics opens --metrics's listener, HOST:PORT: as Listen's, a
// non-loopback address needs a token, which every scrape then carries.
func ListenMetrics(addr string, haveToken bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: expected HOST:PORT (%v)", addr, err)
	}
	if !loopbackHost(host) && !haveToken {
		return nil, fmt.Errorf("--metrics %s: not a loopback address; anyone who reaches it could read the run: give --control-token FILE, which each scrape must then carry (Authorization: Bearer)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves the API on ln, guarded as ep says, until Close. stop ends
// the run as Ctrl-C would.
func Serve(ln net.Listener, ep Endpoint, stop func()) *Server {
	s := New(stop)
	s.ln, s.tls = ln, ep.TLS != nil
	var g *gate
	s.srv, g = serveOn(ln, ep, s.mux())
	s.mu.Lock()
	s.gates = append(s.gates, g)
	s.mu.Unlock()
	return s
}

// serveOn serves h on ln, guarded as ep says: the connections counted
// and bounded (gate.go), every request checked (guard.go); over TLS with
// ep.TLS, HTTP/1.1 only (no h2 is offered: a connection is admitted, and
// closed after an error, as a whole).
func serveOn(ln net.Listener, ep Endpoint, h http.Handler) (*http.Server, *gate) {
	g := newGate(ln)
	srv := newHTTPServer(newGuard(ln, g, ep, h))
	srv.ConnState = g.connState
	srv.ConnContext = connContext
	var l net.Listener = g
	if ep.TLS != nil {
		l = tls.NewListener(g, ep.TLS)
	}
	go srv.Serve(l)
	return srv, g
}

// newHTTPServer is an endpoint's server: a client gets 10 s to send its
// request, body included (the event stream lifts the limit for itself),
// and a connection idle between requests is closed after 30 s, so that
// no client, with or without the token, holds a connection for nothing.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(5*time.Second, readTimeout),
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxBody,
		// The server's own log would go to stderr, the shell's
		// command's terminal: a TLS handshake from a port scanner
		// is nothing to say.
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

// The timeouts of newHTTPServer; shorter in tests.
var (
	readTimeout = 10 * time.Second
	idleTimeout = 30 * time.Second
)

// New returns a control endpoint that serves nothing yet: for
// ServeMetrics alone.
func New(stop func()) *Server {
	s := &Server{stop: stop, hub: newHub(), slots: make(snapshotSlots, maxSnapshots), done: make(chan struct{}), quit: make(chan struct{})}
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(newCollector(s))
	return s
}

func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/links", s.links)
	mux.HandleFunc("PATCH /v1/links", s.set)
	mux.HandleFunc("GET /v1/links/{name}", s.link)
	mux.HandleFunc("PATCH /v1/links/{name}", s.setLink)
	mux.HandleFunc("POST /v1/timeline", s.schedule)
	mux.HandleFunc("GET /v1/timeline", s.timeline)
	mux.HandleFunc("GET /v1/series", s.series)
	mux.HandleFunc("POST /v1/reset", s.reset)
	mux.HandleFunc("POST /v1/partition", s.partition)
	mux.HandleFunc("POST /v1/heal", s.heal)
	mux.HandleFunc("POST /v1/flows/{name}/reset", s.resetFlow)
	mux.HandleFunc("POST /v1/stop", s.doStop)
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) { s.hub.serve(w, r, s.done) })
	mux.HandleFunc("GET /results/{file}", s.result)
	mux.Handle("GET /metrics", s.Metrics())
	ui := uiHandler()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /ui/", ui)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { noRoute(mux, w, r) })
	return mux
}

// noRoute answers, in JSON as every error, a request no route of mux
// takes: 405 with the methods its path takes, else 404.
func noRoute(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodPost} {
		alt := r.Clone(r.Context())
		alt.Method = m
		if _, pattern := mux.Handler(alt); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: the method is not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, fmt.Errorf("%s %s: no such endpoint (see openapi.yaml)", r.Method, r.URL.Path))
}

// ServeMetrics serves the Prometheus metrics alone (GET /metrics) on ln,
// until Close: --metrics, an address for a Prometheus server to scrape
// apart from the control API (ListenMetrics), guarded as the control
// API is: ep's token when it has one (a scrape config's authorization),
// else loopback names only; its connections bounded the same way.
func (s *Server) ServeMetrics(ln net.Listener, ep Endpoint) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.Metrics())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { noRoute(mux, w, r) })
	var g *gate
	s.metrics, g = serveOn(ln, ep, mux)
	s.mu.Lock()
	s.gates = append(s.gates, g)
	s.mu.Unlock()
}

// Metrics is the handler of the endpoint's Prometheus metrics, for
// --metrics to serve on an address of its own too.
func (s *Server) Metrics() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

// Run is a run in progress as the endpoint controls it (emulator.Live):
// what it measured so far, and changes to its path. The endpoint names
// only the run's vocabulary (package summary), so that it links neither
// the emulator nor gVisor.
type Run interface {
	Status() (summary.LiveStatus, error)
	Links() []summary.LinkSummary
	Flows() []flows.FlowSummary
	TUN() *summary.TUNSummary // nil without TUN mode
	WiFi() *wifi.Stats        // nil without a Wi-Fi cell
	Set(sets ...string) (summary.Applied, error)
	SetFor(d time.Duration, sets ...string) (summary.Applied, error)
	Schedule(at time.Duration, sets ...string) error
	Reset() (summary.Applied, error)
	ResetFlow(name string) error
	// Partition makes p the partition among the run's nodes (nil:
	// heals).
	Partition(p *scenario.Partition) (summary.Partitioned, error)
	// Watch makes f receive the run's events; f must not block.
	Watch(f func(summary.LiveEvent))
}

// Attach makes live the run the endpoint controls (nil: none), and
// streams its events.
func (s *Server) Attach(live Run) {
	s.mu.Lock()
	s.live = live
	s.mu.Unlock()
	if live == nil {
		return
	}
	if st, err := live.Status(); err == nil {
		s.hub.publish("run", st)
	}
	live.Watch(func(e summary.LiveEvent) { s.hub.publish(e.Type, e) })
}

// Finished tells the event stream's clients that the results are
// written into out, and serves them from then on under /results/ (the
// report: /results/report.html).
func (s *Server) Finished(out string) {
	root, err := os.OpenRoot(out)
	s.mu.Lock()
	if s.results != nil {
		s.results.Close()
	}
	s.results, s.resultsErr = root, err
	s.mu.Unlock()
	s.hub.publish("finished", map[string]string{"report": "/results/report.html"})
}

// Close stops serving and removes the socket. It is safe to call more
// than once.
func (s *Server) Close() error {
	first := false
	s.closeOnce.Do(func() { first = true })
	if !first {
		return nil
	}
	// The event streams write what they hold and end (done); the
	// requests under way get a second to finish.
	close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var errs []error
	for _, srv := range []*http.Server{s.srv, s.metrics} {
		if srv != nil {
			if srv.Shutdown(ctx) != nil {
				errs = append(errs, srv.Close())
			}
		}
	}
	// Shutdown closed the listeners the servers had taken up; one a
	// server's goroutine had not yet is closed here, so that a unix
	// socket is removed before Close returns, whatever the goroutine
	// does (the process may end first). Closing twice does nothing more.
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Lock()
	if s.results != nil {
		s.results.Close()
		s.results = nil
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

func (s *Server) current(w http.ResponseWriter) Run {
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
// takes them, and their values as a scenario file has them; with For (a
// duration), the keys go back to their values before after that long
// (an outage: {"set": {"link.loss": "100%"}, "for": "5s"}).
type SetRequest struct {
	Set map[string]string `json:"set"`
	For string            `json:"for,omitempty"`
	// At, when given, makes the change at that time of the run (from its
	// start) instead of now, as POST /v1/timeline does.
	At string `json:"at,omitempty"`
}

func (s *Server) set(w http.ResponseWriter, r *http.Request) { s.setKeys(w, r, "") }

// link answers one direction (uplink, eu.uplink) as GET /v1/links has
// it, or a link of a links list (eu) as the list of its two.
func (s *Server) link(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	if ls, _, ok := linkNamed(w, lv, r.PathValue("name")); ok {
		if len(ls) == 1 {
			writeJSON(w, http.StatusOK, ls[0])
		} else {
			writeJSON(w, http.StatusOK, ls)
		}
	}
}

// setLink is PATCH /v1/links with keys of one direction or link, named
// without their prefix: {"set": {"loss": "5%"}} on /v1/links/uplink is
// link.uplink.loss, on /v1/links/eu links.eu.loss, on
// /v1/links/eu.downlink links.eu.downlink.loss.
func (s *Server) setLink(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	if _, prefix, ok := linkNamed(w, lv, r.PathValue("name")); ok {
		s.setKeys(w, r, prefix)
	}
}

// linkNamed finds name among lv's links: a direction (uplink, downlink;
// eu.uplink with a links list), or a link (link, the shorthand's; eu),
// and returns its directions and the prefix of its keys; or answers 404.
func linkNamed(w http.ResponseWriter, lv Run, name string) ([]summary.LinkSummary, string, bool) {
	var names []string
	var of []summary.LinkSummary
	for _, l := range lv.Links() {
		link, _, inList := strings.Cut(l.Name, ".")
		if !inList {
			link = scenario.DefaultLink
		}
		switch {
		case l.Name == name && inList:
			return []summary.LinkSummary{l}, "links." + name + ".", true
		case l.Name == name:
			return []summary.LinkSummary{l}, "link." + name + ".", true
		case link == name:
			of = append(of, l)
		}
		if inList && !slices.Contains(names, link) {
			names = append(names, link)
		}
		names = append(names, l.Name)
	}
	switch {
	case len(of) > 0 && name == scenario.DefaultLink && !strings.Contains(of[0].Name, "."):
		return of, "link.", true
	case len(of) > 0:
		return of, "links." + name + ".", true
	}
	writeError(w, http.StatusNotFound, fmt.Errorf("no link %q (links: %s)", name, strings.Join(names, ", ")))
	return nil, "", false
}

// setKeys applies a SetRequest whose keys take prefix ("" for full key
// paths).
func (s *Server) setKeys(w http.ResponseWriter, r *http.Request, prefix string) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	var req SetRequest
	example := `{"set": {"link.loss": "5%"}}`
	if prefix != "" {
		example = `{"set": {"loss": "5%"}}`
	}
	if !decode(w, r, &req, example) {
		return
	}
	if prefix != "" {
		keyed := make(map[string]string, len(req.Set))
		for k, v := range req.Set {
			keyed[prefix+k] = v
		}
		req.Set = keyed
	}
	if len(req.Set) == 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body: nothing to set (expected %s)", example))
		return
	}
	var err error
	if req.At != "" {
		if req.For != "" {
			writeError(w, http.StatusBadRequest, errors.New(`body: "at" and "for" together: schedule the change and its way back as two changes`))
			return
		}
		at, perr := scenario.ParseDuration(req.At)
		if perr != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("at: %v", perr))
			return
		}
		if err := lv.Schedule(at, sets(req.Set)...); err != nil {
			writeError(w, errorCode(err), err)
			return
		}
		s.status(w, r)
		return
	}
	var applied summary.Applied
	if req.For != "" {
		d, perr := scenario.ParseDuration(req.For)
		if perr != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("for: %v", perr))
			return
		}
		applied, err = lv.SetFor(d, sets(req.Set)...)
	} else {
		applied, err = lv.Set(sets(req.Set)...)
	}
	if err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, Changed{Applied: applied, Links: lv.Links()})
}

// Changed is the answer to a change of the path (PATCH /v1/links, POST
// /v1/reset): when it applied, each setting of a direction it moved (old
// and new, as the direction's summary words them), when the keys go back
// (a change "for" a while), and every direction after it, as GET
// /v1/links has them.
type Changed struct {
	summary.Applied
	Links []summary.LinkSummary `json:"links"`
}

// decode reads r's JSON body into v, strictly; on an error it answers 400
// with example, the body expected, and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any, example string) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Nothing but white space may follow the value.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("more after the JSON value")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("body: more than %d bytes", maxBody))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Errorf("body: %v (expected %s)", err, example))
		return false
	}
	return true
}

// sets turns a request's keys and values into --set's form, in key order.
func sets(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + m[k]
	}
	return out
}

// errorCode is the status of a change's error: 409 once the run ended, 429
// past the changes a run may make, 400 for what the request got wrong.
func errorCode(err error) int {
	switch {
	case errors.Is(err, summary.ErrRunEnded):
		return http.StatusConflict
	case errors.Is(err, summary.ErrTooManyChanges):
		return http.StatusTooManyRequests
	}
	return http.StatusBadRequest
}

// ScheduleRequest is POST /v1/timeline's body: a change to make at a
// time of the run ahead (from its start), recorded as PATCH's are.
type ScheduleRequest struct {
	At  string            `json:"at"`
	Set map[string]string `json:"set"`
}

func (s *Server) schedule(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	var req ScheduleRequest
	if !decode(w, r, &req, `{"at": "5s", "set": {"link.loss": "5%"}}`) {
		return
	}
	at, err := scenario.ParseDuration(req.At)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("at: %v", err))
		return
	}
	if len(req.Set) == 0 {
		writeError(w, http.StatusBadRequest, errors.New(`body: nothing to set (expected {"at": "5s", "set": {"link.loss": "5%"}})`))
		return
	}
	if err := lv.Schedule(at, sets(req.Set)...); err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	s.status(w, r)
}

// PartitionRequest is POST /v1/partition's body: groups of the run's
// nodes' names (and "client", the TUN device's side); with OneWay, two
// groups, the first's packets to the second dropped.
type PartitionRequest struct {
	Groups [][]string `json:"groups"`
	OneWay bool       `json:"one_way"`
}

// partition partitions the run's nodes now.
func (s *Server) partition(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	var req PartitionRequest
	if !decode(w, r, &req, `{"groups": [["a"], ["b", "c"]]}`) {
		return
	}
	if len(req.Groups) == 0 {
		writeError(w, http.StatusBadRequest, errors.New(`body: no groups (expected {"groups": [["a"], ["b", "c"]]}; POST /v1/heal ends a partition)`))
		return
	}
	done, err := lv.Partition(&scenario.Partition{Groups: req.Groups, OneWay: req.OneWay})
	if err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, done)
}

// heal ends the partition in force.
func (s *Server) heal(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	done, err := lv.Partition(nil)
	if err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, done)
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	applied, err := lv.Reset()
	if err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, Changed{Applied: applied, Links: lv.Links()})
}

// resetFlow ends a TCP flow's connection with a RST both ways.
func (s *Server) resetFlow(w http.ResponseWriter, r *http.Request) {
	lv := s.current(w)
	if lv == nil {
		return
	}
	if err := lv.ResetFlow(r.PathValue("name")); err != nil {
		writeError(w, errorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, lv.Flows())
}

// result serves a file of the run's output folder once Finished: the
// report and what it shows. A file is opened in the folder as a root, so
// that a symbolic link there that leads out of it (to /etc/shadow) is
// refused, and only a regular file is served (a FIFO would hang the
// request; it is opened without blocking, and refused).
func (s *Server) result(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	s.mu.Lock()
	over := s.results != nil || s.resultsErr != nil
	s.mu.Unlock()
	if !over {
		writeError(w, http.StatusConflict, errors.New("no results yet: the run is not over"))
		return
	}
	ext := filepath.Ext(name)
	if !fs.ValidPath(name) || strings.Contains(name, "/") ||
		!slices.Contains([]string{".html", ".png", ".svg", ".json", ".csv", ".yaml", ".jsonl"}, ext) {
		writeError(w, http.StatusNotFound, fmt.Errorf("%s is not among the results served", name))
		return
	}
	f, err := s.openResult(name)
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		writeError(w, http.StatusNotFound, fmt.Errorf("%s is not among the results served", name))
		return
	}
	w.Header().Set("Content-Security-Policy", resultsCSP)
	http.ServeContent(w, r, name, fi.ModTime(), f)
}

// openResult opens the result name, in the output folder's root, without
// blocking on a FIFO. It holds s.mu, which Close takes to close the root;
// the file outlives the root.
func (s *Server) openResult(name string) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.results == nil {
		return nil, fmt.Errorf("the results: %v", s.resultsErr)
	}
	f, err := s.results.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s is not among the results served", name)
	}
	return f, nil
}

// Quit is closed by POST /v1/stop once the results are written (Finished):
// netjam run --ui serves the report until then.
func (s *Server) Quit() <-chan struct{} { return s.quit }

// Addr is the endpoint's address as --control takes it: unix:PATH or
// HOST:PORT (the port chosen, for port 0).
func (s *Server) Addr() string {
	if a := s.ln.Addr(); a.Network() == "unix" {
		return "unix:" + a.String()
	}
	return s.ln.Addr().String()
}

// URL is the endpoint's URL, for a TCP address: http://HOST:PORT, or
// https:// over TLS; "" for a unix socket.
func (s *Server) URL() string {
	if s.ln.Addr().Network() == "unix" {
		return ""
	}
	if s.tls {
		return "https://" + s.ln.Addr().String()
	}
	return "http://" + s.ln.Addr().String()
}

func (s *Server) doStop(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	over := s.results != nil || s.resultsErr != nil
	s.mu.Unlock()
	if over {
		s.quitOnce.Do(func() { close(s.quit) })
		writeJSON(w, http.StatusOK, map[string]string{"status": "quitting"})
		return
	}
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

// ShellSocket is the socket of a bare --control of netjam shell: in its
// output folder outDir, else in the temporary folder, named for this
// process, so that shells side by side do not meet.
func ShellSocket(outDir string) string {
	if outDir == "" {
		outDir = os.TempDir()
	}
	return "unix:" + filepath.Join(outDir, fmt.Sprintf("netjam-%d.sock", os.Getpid()))
}

// Loopback reports whether addr, HOST:PORT, is this machine's loopback:
// a loopback address, or localhost.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}
