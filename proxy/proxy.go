package proxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Proxy is one proxy: a listener whose connections are carried to the
// upstream across its paths (groups). Its methods are the API's.
type Proxy struct {
	srv  *Server
	name string
	log  *zap.Logger

	mu       sync.Mutex // guards the fields below
	listen   string     // as given, then the listener's address once started
	upstream string
	udp      bool
	enabled  bool
	toxics   []*Toxic // in the order added
	groups   []*group
	conns    map[*tcpConn]struct{}
	sessions map[string]*udpSession // UDP: by client address
	ln       net.Listener
	pc       net.PacketConn
	rnd      *rand.Rand // toxicity draws
	events   eventLog
	// closedStats are the counters of the groups closed so far.
	closedStats pathStats
	// stop ends the listener's goroutines; done is closed when they and
	// every connection of the listener ended.
	stop context.CancelFunc
	done chan struct{}
	// closing counts the paths being closed apart (groupForLocked), which
	// stopAndWait waits for.
	closing sync.WaitGroup

	counts counters
}

// counters are a proxy's counts for the metrics, kept across restarts.
type counters struct {
	accepted, refused, upstreamFailed, pathFailed, resets atomic.Uint64
	// bytes are the bytes read from each direction's source and written
	// to its destination, as toxiproxy's metrics count them; discarded,
	// those a toxic dropped (reset_peer, limit_data, timeout).
	received, sent, discarded [2]atomic.Uint64
	paths                     atomic.Uint64 // paths started
	datagramsDropped          atomic.Uint64 // UDP: over the sessions' bound or unsendable
	eventsDropped             atomic.Uint64
}

// proxyJSON is a proxy as the API shows it.
type proxyJSON struct {
	Name     string   `json:"name"`
	Listen   string   `json:"listen"`
	Upstream string   `json:"upstream"`
	Enabled  bool     `json:"enabled"`
	Protocol string   `json:"protocol,omitempty"` // netjam's: "udp" only
	Toxics   []*Toxic `json:"toxics"`
}

func (p *Proxy) json() proxyJSON {
	p.mu.Lock()
	defer p.mu.Unlock()
	j := proxyJSON{Name: p.name, Listen: p.listen, Upstream: p.upstream, Enabled: p.enabled, Toxics: p.toxicsLocked()}
	if p.udp {
		j.Protocol = "udp"
	}
	return j
}

// toxicsLocked returns copies of the toxics, upstream ones first, as
// toxiproxy lists them.
func (p *Proxy) toxicsLocked() []*Toxic {
	out := make([]*Toxic, 0, len(p.toxics))
	for _, d := range []direction{upstream, downstream} {
		for _, t := range p.toxics {
			if t.dir == d {
				out = append(out, t.clone())
			}
		}
	}
	return out
}

func newProxy(srv *Server, name, listen, upstream string, udp bool) *Proxy {
	if listen == "" {
		// toxiproxy's "" is every interface; netjam's is loopback only,
		// so that no proxy opens the upstream to the network unasked.
		listen = "127.0.0.1:0"
	}
	return &Proxy{srv: srv, name: name, listen: listen, upstream: upstream, udp: udp,
		log:   srv.log.With(zap.String("proxy", name)),
		conns: map[*tcpConn]struct{}{}, sessions: map[string]*udpSession{},
		rnd: rand.New(rand.NewPCG(srv.seed, uint64(len(name))^hashString(name)))}
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// start opens the listener and serves it. With p.mu held.
func (p *Proxy) startLocked() error {
	if p.enabled {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if p.udp {
		pc, err := net.ListenPacket("udp", p.listen)
		if err != nil {
			cancel()
			return listenError(p.name, p.listen, err)
		}
		p.pc, p.listen = pc, pc.LocalAddr().String()
		go p.serveUDP(ctx, pc, done)
	} else {
		ln, err := net.Listen("tcp", p.listen)
		if err != nil {
			cancel()
			return listenError(p.name, p.listen, err)
		}
		p.ln, p.listen = ln, ln.Addr().String()
		go p.serveTCP(ctx, ln, done)
	}
	p.stop, p.done, p.enabled = cancel, done, true
	p.eventLocked("enabled", "listening on "+p.listen)
	p.log.Info("proxy started", zap.String("listen", p.listen), zap.String("upstream", p.upstream))
	return nil
}

// listenError names the address in use, or what else went wrong.
func listenError(name, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return errorf(500, "proxy %s: listen %s: the address is in use (by another proxy or program)", name, addr)
	}
	return errorf(500, "proxy %s: listen %s: %v", name, addr, err)
}

// stop closes the listener and every connection (toxiproxy's "down"),
// and the paths, and waits for their goroutines. Without p.mu.
func (p *Proxy) stopAndWait() {
	p.mu.Lock()
	if !p.enabled {
		p.mu.Unlock()
		return
	}
	p.enabled = false
	p.stop()
	if p.ln != nil {
		p.ln.Close()
	}
	if p.pc != nil {
		p.pc.Close()
	}
	for c := range p.conns {
		c.close(false)
	}
	for _, s := range p.sessions {
		s.close()
	}
	done := p.done
	p.eventLocked("disabled", "listener and connections closed")
	p.mu.Unlock()
	<-done
	p.mu.Lock()
	gs := p.groups
	p.groups = nil
	p.ln, p.pc = nil, nil
	p.mu.Unlock()
	for _, g := range gs {
		p.closeGroup(g)
	}
	p.closing.Wait()
	p.log.Info("proxy stopped")
}

// serveTCP accepts connections until ctx is done, then waits for those
// it started.
func (p *Proxy) serveTCP(ctx context.Context, ln net.Listener, done chan struct{}) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(done)
	}()
	for {
		rc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, say: wait a little rather than spin.
			p.log.Warn("accept", zap.Error(err))
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return
			}
			continue
		}
		c := p.admit(ctx, rc)
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run()
		}()
	}
}

// admit registers a new connection on a group, or refuses it (resetting
// it, counted) past the bound on connections or when no path starts.
func (p *Proxy) admit(ctx context.Context, rc net.Conn) *tcpConn {
	p.counts.accepted.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) >= p.srv.opts.MaxConns {
		p.counts.refused.Add(1)
		resetConn(rc)
		return nil
	}
	g, err := p.groupForLocked()
	if err != nil {
		p.counts.pathFailed.Add(1)
		p.eventLocked("error", "no path for a connection: "+err.Error())
		resetConn(rc)
		return nil
	}
	g.conns++
	c := newTCPConn(ctx, p, g, rc)
	p.applyLocked(c, nil, true)
	p.conns[c] = struct{}{}
	return c
}

// maxGroups bounds the paths of a proxy: toxics with toxicities below 1
// make one per combination drawn.
const maxGroups = 16

// groupForLocked draws the path's toxics of a new connection (each with
// its toxicity; not the stream toxics, which each connection draws for
// itself) and returns the group of those, starting it if none has them.
// Past maxGroups the connection takes the group whose toxics differ
// least from those drawn.
func (p *Proxy) groupForLocked() (*group, error) {
	var drawn []*Toxic
	for _, t := range p.toxics {
		if !t.onStream() && p.draw(t.Toxicity) {
			drawn = append(drawn, t)
		}
	}
	var best *group
	bestDiff := -1
	for _, g := range p.groups {
		if g.stale {
			continue
		}
		diff := 0
		for _, t := range p.toxics {
			if !t.onStream() && g.names[t.Name] != slices.Contains(drawn, t) {
				diff++
			}
		}
		if diff == 0 {
			return g, nil
		}
		if best == nil || diff < bestDiff {
			best, bestDiff = g, diff
		}
	}
	if len(p.groups) >= maxGroups {
		// Close an idle group to make room, else share the nearest.
		for i, g := range p.groups {
			if g.conns == 0 {
				p.groups = slices.Delete(p.groups, i, i+1)
				p.closing.Add(1)
				go func() {
					defer p.closing.Done()
					p.closeGroup(g) // it takes p.mu, held here
				}()
				return p.newGroupLocked(clones(drawn))
			}
		}
		if best != nil {
			return best, nil
		}
	}
	return p.newGroupLocked(clones(drawn))
}

func clones(ts []*Toxic) []*Toxic {
	out := make([]*Toxic, len(ts))
	for i, t := range ts {
		out[i] = t.clone()
	}
	return out
}

// draw reports true with probability x.
func (p *Proxy) draw(x float32) bool {
	return x >= 1 || x > 0 && p.rnd.Float32() < x
}

// forget removes a connection that ended, and closes its group if that
// was stale and is now empty.
func (p *Proxy) forget(c *tcpConn) {
	p.mu.Lock()
	delete(p.conns, c)
	drop := p.releaseLocked(c.g)
	p.mu.Unlock()
	if drop != nil {
		p.closeGroup(drop)
	}
}

// releaseLocked counts a connection or session of g gone, and returns g
// when that leaves it stale and empty, removed, for the caller to close.
func (p *Proxy) releaseLocked(g *group) *group {
	g.conns--
	if g.stale && g.conns == 0 {
		if i := slices.Index(p.groups, g); i >= 0 {
			p.groups = slices.Delete(p.groups, i, i+1)
			return g
		}
	}
	return nil
}

// change is what happened to a toxic in a change of a proxy's toxics.
type change uint8

const (
	// kept: each connection keeps its draw of the toxic, and its state.
	kept change = iota
	// updated: the toxic's toxicity is drawn again; its state is kept.
	updated
	// added: the toxic is drawn, and its state begins afresh.
	added
)

// setToxics puts ts in force on every group, between two packets of each
// direction, and on the connections' streams; what changed is recorded
// as an event. changes says what happened to which toxics (the others
// are kept). A toxic added or updated is drawn again (its toxicity), as
// toxiproxy draws it for each connection: once for each group, whose
// connections share its packets, and the stream toxics for each
// connection. A group whose Wi-Fi cell the change would alter keeps its
// cell, takes the rest and turns stale; one whose path refuses the
// change keeps everything (frozen). Stale groups that no connection
// crosses are closed. With p.mu held.
func (p *Proxy) setToxicsLocked(ts []*Toxic, changes map[string]change, what string) {
	p.toxics = ts
	p.eventLocked("toxics", what)
	for _, g := range p.groups {
		if g.frozen {
			continue
		}
		in, names := p.drawLocked(g, ts, changes)
		if cellSet(p.srv.baseLink, in) != g.cell {
			in = keepCell(g, in, names)
			if !g.stale && g.conns > 0 {
				p.eventLocked("stale", fmt.Sprintf("a path keeps its Wi-Fi cell for its %d open connections (a cell cannot change while it runs), with the other toxics' changes; new connections get a new path", g.conns))
			}
			g.stale = true
		}
		if err := g.b.Set(pathSets(p.srv.baseLink, in)...); err != nil {
			g.stale, g.frozen = true, true
			p.eventLocked("stale", "a path kept its settings for its open connections and takes no new ones: "+err.Error())
			continue
		}
		g.names, g.toxics = names, in
	}
	p.closeIdleStaleLocked()
	for c := range p.conns {
		p.applyLocked(c, changes, false)
	}
}

// drawLocked returns the path toxics of ts group g has after a change
// (changes), a copy each, and their names: those added or updated drawn
// again, the others as g drew them.
func (p *Proxy) drawLocked(g *group, ts []*Toxic, changes map[string]change) ([]*Toxic, map[string]bool) {
	var in []*Toxic
	names := map[string]bool{}
	for _, t := range ts {
		if t.onStream() {
			continue
		}
		has := g.names[t.Name]
		if changes[t.Name] != kept {
			has = p.draw(t.Toxicity)
		}
		if has {
			in = append(in, t.clone())
			names[t.Name] = true
		}
	}
	return in, names
}

// keepCell returns in with g's wifi toxic in force (or none) in place of
// the one in has, names changed to match.
func keepCell(g *group, in []*Toxic, names map[string]bool) []*Toxic {
	in = slices.DeleteFunc(in, func(t *Toxic) bool {
		if t.Type == wifiType {
			delete(names, t.Name)
			return true
		}
		return false
	})
	for _, t := range g.toxics {
		if t.Type == wifiType {
			in = append(in, t)
			names[t.Name] = true
		}
	}
	return in
}

// closeIdleStaleLocked closes the stale groups no connection crosses:
// none would join them. closeGroup takes p.mu, held here.
func (p *Proxy) closeIdleStaleLocked() {
	p.groups = slices.DeleteFunc(p.groups, func(g *group) bool {
		if !g.stale || g.conns > 0 {
			return false
		}
		p.closing.Add(1)
		go func() {
			defer p.closing.Done()
			p.closeGroup(g)
		}()
		return true
	})
}

// applyLocked puts the proxy's toxics in force on connection c: its
// path's, and the stream toxics it drew. It draws those again where
// changes says they were added or updated, every one when the connection
// opens, and keeps its draws of the others.
func (p *Proxy) applyLocked(c *tcpConn, changes map[string]change, opening bool) {
	in := slices.Clone(c.g.toxics)
	has := map[string]bool{}
	var fresh map[string]bool
	for _, t := range p.toxics {
		if !t.onStream() {
			continue
		}
		ch := changes[t.Name]
		drawn := c.has[t.Name]
		if opening || ch != kept {
			drawn = p.draw(t.Toxicity)
		}
		if drawn {
			has[t.Name] = true
			in = append(in, t)
		}
		if ch == added {
			if fresh == nil {
				fresh = map[string]bool{}
			}
			fresh[t.Name] = true
		}
	}
	c.has = has
	c.applyToxics(in, p.toxics, fresh)
}

// Events are what happened to a proxy, for GET /proxies/{proxy}/events:
// toxics added, changed and removed, the proxy enabled and disabled,
// paths that could not change.

// Event is one event of a proxy.
type Event struct {
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`
	Detail string    `json:"detail"`
}

// maxEvents bounds a proxy's event log; the oldest go first, counted.
const maxEvents = 256

type eventLog struct {
	events []Event
}

func (p *Proxy) eventLocked(typ, detail string) {
	if len(p.events.events) == maxEvents {
		p.events.events = slices.Delete(p.events.events, 0, 1)
		p.counts.eventsDropped.Add(1)
	}
	p.events.events = append(p.events.events, Event{time.Now().UTC(), typ, detail})
}

// Events returns the proxy's events, oldest first.
func (p *Proxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events.events)
}

// maxDescribed bounds a toxic's JSON in an event: a trace's content may
// be 256 KiB, and a proxy keeps 256 events.
const maxDescribed = 512

// describe says what a toxic is, for events.
func describe(t *Toxic) string {
	s := fmt.Sprintf("%s (%s, %s, toxicity %s)", t.Name, t.Type, t.Stream, strconv.FormatFloat(float64(t.Toxicity), 'g', -1, 32))
	b, _ := t.MarshalJSON()
	if len(b) > maxDescribed {
		return fmt.Sprintf("%s %s... (%d bytes)", s, strings.ToValidUTF8(string(b[:maxDescribed]), ""), len(b))
	}
	return s + " " + string(b)
}
