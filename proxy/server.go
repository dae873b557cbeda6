package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// Options are a Server's.
type Options struct {
	// Scenario is the YAML of the scenario whose link every proxy's path
	// starts from (its delay, loss, rate, ... apply under the toxics);
	// nil: a clean path. ScenarioName names it in messages.
	Scenario     []byte
	ScenarioName string
	// Sets override the scenario's keys, as netjam run --set does
	// ("link.delay=20ms", "seed=7").
	Sets []string
	// Version is what GET /version answers.
	Version string
	// MaxProxies bounds the proxies (0: DefaultMaxProxies); MaxConns a
	// proxy's open connections, or a UDP proxy's sessions (0:
	// DefaultMaxConns). Past them a create is refused (400) and a
	// connection reset, counted.
	MaxProxies, MaxConns int
	// UI serves the dashboard, a page that lists the proxies and their
	// toxics, at /ui/ of the API's listener (netjam proxy --ui).
	UI bool
	// Log is the logger; nil: none.
	Log *zap.Logger
}

// Defaults of Options.
const (
	DefaultMaxProxies = 1000
	DefaultMaxConns   = 4096
)

// maxBody bounds a request's body: a populate of many proxies fits.
const maxBody = 1 << 20

// Server is a set of proxies and the API that manages them. Its methods
// are safe for concurrent use.
type Server struct {
	opts     Options
	log      *zap.Logger
	base     *scenario.Scenario
	baseLink baseLink
	seed     uint64

	mu      sync.Mutex // guards proxies, closed; held across a change of the set
	proxies map[string]*Proxy
	closed  bool
}

// New checks the options and the scenario (a path only: no flows, TUN or
// capture, one link, and a Wi-Fi cell at most) and returns a Server with
// no proxy.
func New(o Options) (*Server, error) {
	if o.MaxProxies <= 0 {
		o.MaxProxies = DefaultMaxProxies
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Scenario == nil {
		o.Scenario, o.ScenarioName = []byte("name: proxy\n"), "proxy"
	}
	plan, err := scenario.Parse(o.ScenarioName, o.Scenario, scenario.Options{Sets: o.Sets})
	if err != nil {
		return nil, err
	}
	if len(plan.Runs) != 1 {
		return nil, fmt.Errorf("%s has %d variants; a proxy's path is one of them: choose it with --set", o.ScenarioName, len(plan.Runs))
	}
	s := plan.Runs[0]
	if len(s.Links) > 1 || len(s.Timeline) > 0 {
		return nil, fmt.Errorf("%s: a proxy's path is one link without a timeline (the toxics change it)", o.ScenarioName)
	}
	if !s.SeedSet {
		s.Seed, s.SeedSet = emulator.NewSeed(), true
	}
	srv := &Server{opts: o, log: o.Log, base: s, seed: s.Seed, proxies: map[string]*Proxy{}}
	srv.baseLink.values = map[string]string{}
	for _, d := range []direction{upstream, downstream} {
		c := s.Uplink
		if d == downstream {
			c = s.Downlink
		}
		srv.baseLink.dirs[d].delay, srv.baseLink.dirs[d].jitter = c.Delay.Time, c.Delay.Jitter
		srv.baseLink.dirs[d].bitrate = c.Rate.Bitrate
		for _, k := range pathKeys {
			key := "link." + d.link() + "." + k
			srv.baseLink.values[key] = s.Value(key)
		}
	}
	srv.baseLink.values["wifi"] = s.Value("wifi")
	// A path of the scenario once, to report now what would refuse it.
	b, err := emulator.NewBench(s, emulator.BenchOptions{Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		return nil, errors.New("unused")
	}, WiFi: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.ScenarioName, err)
	}
	b.Close()
	return srv, nil
}

// Seed returns the seed of the proxies' paths and toxicity draws.
func (s *Server) Seed() uint64 { return s.seed }

// Close stops every proxy and waits for their connections to end.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	ps := make([]*Proxy, 0, len(s.proxies))
	for _, p := range s.proxies {
		ps = append(ps, p)
	}
	s.proxies = map[string]*Proxy{}
	s.mu.Unlock()
	for _, p := range ps {
		p.stopAndWait()
	}
}

// proxyInput is a proxy in a request: POST /proxies, an update, an item
// of POST /populate or of a --config file.
type proxyInput struct {
	Name     string          `json:"name"`
	Listen   *string         `json:"listen"`
	Upstream *string         `json:"upstream"`
	Enabled  *bool           `json:"enabled"`
	Protocol *string         `json:"protocol"`
	Toxics   json.RawMessage `json:"toxics"` // toxiproxy's clients send it back; not read
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// checkProxy checks a proxy's fields; at says where it is (" at proxy 2").
func checkProxy(in *proxyInput, at string) error {
	if in.Name == "" {
		return errorf(400, "missing required field: name%s", at)
	}
	if err := checkName("proxy", in.Name); err != nil {
		return err
	}
	if in.Upstream == nil || *in.Upstream == "" {
		return errorf(400, "missing required field: upstream%s", at)
	}
	if _, _, err := net.SplitHostPort(*in.Upstream); err != nil {
		return errorf(400, "proxy %s: upstream %q: expected HOST:PORT (%v)", in.Name, *in.Upstream, err)
	}
	if in.Listen != nil && *in.Listen != "" {
		if _, _, err := net.SplitHostPort(*in.Listen); err != nil {
			return errorf(400, "proxy %s: listen %q: expected HOST:PORT (%v)", in.Name, *in.Listen, err)
		}
	}
	if in.Protocol != nil && *in.Protocol != "" && *in.Protocol != "tcp" && *in.Protocol != "udp" {
		return errorf(400, "proxy %s: protocol %q: expected tcp or udp", in.Name, *in.Protocol)
	}
	return nil
}

func (in *proxyInput) udp() bool { return in.Protocol != nil && *in.Protocol == "udp" }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// create adds a proxy, started when enabled. With s.mu held.
func (s *Server) createLocked(in *proxyInput) (*Proxy, error) {
	if s.closed {
		return nil, errorf(503, "the server is closing")
	}
	if _, ok := s.proxies[in.Name]; ok {
		return nil, errorf(409, "proxy already exists: %s", in.Name)
	}
	if len(s.proxies) >= s.opts.MaxProxies {
		return nil, errorf(400, "proxy %s: there are %d proxies already, the most one server holds (--max-proxies)", in.Name, s.opts.MaxProxies)
	}
	p := newProxy(s, in.Name, str(in.Listen), *in.Upstream, in.udp())
	if in.Enabled == nil || *in.Enabled {
		p.mu.Lock()
		err := p.startLocked()
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	s.proxies[in.Name] = p
	return p, nil
}

// Populate creates or replaces the proxies of a toxiproxy config (a JSON
// list of proxies): one whose name exists with the same listen, upstream
// and protocol is kept as it is, one that differs replaced. On error the
// proxies done before it stay, and are returned.
func (s *Server) Populate(data []byte) ([]*Proxy, error) {
	var ins []proxyInput
	if err := decodeStrict(data, &ins); err != nil {
		return nil, errorf(400, "bad request body: %v", err)
	}
	for i := range ins {
		if err := checkProxy(&ins[i], fmt.Sprintf(" at proxy %d", i+1)); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Proxy
	for i := range ins {
		in := &ins[i]
		if old, ok := s.proxies[in.Name]; ok {
			if !old.differs(in) {
				out = append(out, old)
				continue
			}
			delete(s.proxies, in.Name)
			s.mu.Unlock()
			old.stopAndWait()
			s.mu.Lock()
		}
		p, err := s.createLocked(in)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// differs reports whether in would listen or go elsewhere than p, as
// toxiproxy compares them (listen resolved).
func (p *Proxy) differs(in *proxyInput) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in.Upstream != nil && *in.Upstream != p.upstream || in.Protocol != nil && in.udp() != p.udp {
		return true
	}
	if in.Listen == nil {
		return false
	}
	l := *in.Listen
	if l == "" {
		l = "127.0.0.1:0"
	}
	if a, err := net.ResolveTCPAddr("tcp", l); err == nil {
		l = a.String()
	}
	return l != p.listen
}

// get returns the proxy name.
func (s *Server) get(name string) (*Proxy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.proxies[name]
	if !ok {
		return nil, errorf(404, "proxy not found: %s", name)
	}
	return p, nil
}

// Proxy returns the proxy name, nil if there is none.
func (s *Server) Proxy(name string) *Proxy {
	p, _ := s.get(name)
	return p
}

// update changes a proxy as toxiproxy's update does: a new listen or
// upstream restarts it (closing its connections), enabled starts or
// stops it.
func (s *Server) update(name string, body []byte) (*Proxy, error) {
	p, err := s.get(name)
	if err != nil {
		return nil, err
	}
	var in proxyInput
	if err := decodeStrict(body, &in); err != nil {
		return nil, errorf(400, "bad request body: %v", err)
	}
	p.mu.Lock()
	in.Name = p.name // the name in the URL; a body's name is ignored, as toxiproxy does
	if in.Upstream == nil {
		in.Upstream = &p.upstream
	}
	enabled := p.enabled
	if in.Enabled != nil {
		enabled = *in.Enabled
	}
	p.mu.Unlock()
	if err := checkProxy(&in, ""); err != nil {
		return nil, err
	}
	if p.differs(&in) {
		p.stopAndWait()
		p.mu.Lock()
		if in.Listen != nil {
			p.listen = *in.Listen
			if p.listen == "" {
				p.listen = "127.0.0.1:0"
			}
		}
		p.upstream = *in.Upstream
		if in.Protocol != nil {
			p.udp = in.udp()
		}
		p.mu.Unlock()
	}
	if enabled {
		p.mu.Lock()
		err := p.startLocked()
		p.mu.Unlock()
		return p, err
	}
	p.stopAndWait()
	return p, nil
}

// remove stops and deletes a proxy.
func (s *Server) remove(name string) error {
	s.mu.Lock()
	p, ok := s.proxies[name]
	if !ok {
		s.mu.Unlock()
		return errorf(404, "proxy not found: %s", name)
	}
	delete(s.proxies, name)
	s.mu.Unlock()
	p.stopAndWait()
	return nil
}

// Reset enables every proxy and removes every toxic, as toxiproxy's
// POST /reset.
func (s *Server) Reset() error {
	for _, p := range s.sorted() {
		p.mu.Lock()
		err := p.startLocked()
		if len(p.toxics) > 0 {
			p.setToxicsLocked(nil, nil, "reset: every toxic removed")
		}
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) sorted() []*Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := make([]*Proxy, 0, len(s.proxies))
	for _, p := range s.proxies {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}

// maxToxics bounds a proxy's toxics.
const maxToxics = 64

// addToxic adds the toxic of body to p.
func (p *Proxy) addToxic(body []byte) (*Toxic, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := newToxic(body, p.udp, time.Now())
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(p.toxics, func(o *Toxic) bool { return o.Name == t.Name }) {
		return nil, errorf(409, "toxic already exists: %s", t.Name)
	}
	if len(p.toxics) >= maxToxics {
		return nil, errorf(400, "toxic %s: proxy %s has %d toxics, the most a proxy holds", t.Name, p.name, maxToxics)
	}
	// One trace a direction: a second would replace the first's rate,
	// and hold its content for nothing.
	if t.Type == traceType {
		if i := slices.IndexFunc(p.toxics, func(o *Toxic) bool { return o.Type == traceType && o.dir == t.dir }); i >= 0 {
			return nil, errorf(400, "toxic %s: proxy %s has a trace %s already (%s): change it, or remove it first", t.Name, p.name, t.dir, p.toxics[i].Name)
		}
	}
	// One cell a proxy: its path crosses one.
	if t.Type == wifiType {
		if i := slices.IndexFunc(p.toxics, func(o *Toxic) bool { return o.Type == wifiType }); i >= 0 {
			return nil, errorf(400, "toxic %s: proxy %s has a wifi toxic already (%s): its path crosses one cell; change it, or remove it first", t.Name, p.name, p.toxics[i].Name)
		}
	}
	ts := append(slices.Clone(p.toxics), t)
	if err := p.srv.check(t, ts); err != nil {
		return nil, err
	}
	p.setToxicsLocked(ts, map[string]change{t.Name: added}, "added "+describe(t))
	return t.clone(), nil
}

// check tries the path of the toxics ts, with t among them, on the base
// scenario: netjam's own toxics are scenario keys, whose messages say
// what is wrong.
func (s *Server) check(t *Toxic, ts []*Toxic) error {
	if _, err := s.base.With(append(pathSets(s.baseLink, ts), cellSet(s.baseLink, ts))...); err != nil {
		msg := err.Error()
		// "link.downlink.loss.p: ..." is the toxic's "attributes.p: ...".
		msg = strings.ReplaceAll(msg, "--set ", "")
		key := "link." + t.dir.link() + "." + t.Type
		switch t.Type {
		case wifiType:
			key = "wifi"
		case traceType:
			// A trace is the direction's rate, its data the trace_data.
			key = "link." + t.dir.link() + ".rate"
			msg = strings.ReplaceAll(msg, key+".trace_data", "attributes.data")
		}
		msg = strings.ReplaceAll(msg, key, "attributes")
		return errorf(400, "toxic %s: %s", t.Name, msg)
	}
	return nil
}

// updateToxic changes the toxic name of p with body.
func (p *Proxy) updateToxic(name string, body []byte) (*Toxic, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.toxics, func(o *Toxic) bool { return o.Name == name })
	if i < 0 {
		return nil, errorf(404, "toxic not found: %s", name)
	}
	t, err := updateToxic(p.toxics[i], body, time.Now())
	if err != nil {
		return nil, err
	}
	ts := slices.Clone(p.toxics)
	ts[i] = t
	if err := p.srv.check(t, ts); err != nil {
		return nil, err
	}
	// Drawn again, whatever changed, as toxiproxy's update does.
	p.setToxicsLocked(ts, map[string]change{t.Name: updated}, "changed "+describe(t))
	return t.clone(), nil
}

// removeToxic removes the toxic name of p.
func (p *Proxy) removeToxic(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.toxics, func(o *Toxic) bool { return o.Name == name })
	if i < 0 {
		return errorf(404, "toxic not found: %s", name)
	}
	t := p.toxics[i]
	p.setToxicsLocked(slices.Delete(slices.Clone(p.toxics), i, i+1), nil, "removed "+t.Name)
	return nil
}

func (p *Proxy) toxic(name string) (*Toxic, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.toxics {
		if t.Name == name {
			return t.clone(), nil
		}
	}
	return nil, errorf(404, "toxic not found: %s", name)
}

// Stats are a proxy's counters now, as the metrics export them.
type Stats struct {
	Accepted, Open, Refused, UpstreamFailed, PathFailed, Resets uint64
	Received, Sent, Discarded                                   [2]uint64 // upstream, downstream
	Paths                                                       int       // running now
	Retransmits, Timeouts                                       uint64    // TCP, both hosts of every path
	// Links are each running path's directions (uplink, downlink).
	Links [][]summary.LinkSummary
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	gs := slices.Clone(p.groups)
	st := Stats{Open: uint64(len(p.conns) + len(p.sessions)), Paths: len(gs)}
	ps := p.closedStats
	p.mu.Unlock()
	for _, g := range gs {
		ps.add(hostStats(g))
		st.Links = append(st.Links, g.b.Links())
	}
	c := &p.counts
	st.Accepted, st.Refused, st.UpstreamFailed, st.PathFailed, st.Resets = c.accepted.Load(), c.refused.Load(), c.upstreamFailed.Load(), c.pathFailed.Load(), c.resets.Load()
	for d := range 2 {
		st.Received[d], st.Sent[d], st.Discarded[d] = c.received[d].Load(), c.sent[d].Load(), c.discarded[d].Load()
	}
	st.Retransmits, st.Timeouts = ps.retransmits, ps.timeouts
	return st
}

// readBody reads a request's body, at most maxBody.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errorf(413, "the body is more than %d bytes", maxBody)
		}
		return nil, errorf(400, "bad request body: %v", err)
	}
	return b, nil
}
