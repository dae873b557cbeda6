package topology

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/impair"
)

// Router is a classifier: it hands each packet to the node its route
// for the packet's destination address names, the longest prefix first,
// else to the default route's, else drops it (counted, NoRoute). Routes
// may also name a protocol and a port (the paths of a scenario: see
// Match), and a source router (NewSourceRouter) reads the source address
// and port instead, so that replies go back the way their requests
// came. Its
// routes are settings, not structure: the graph links the router to
// every node a route may name, and Set swaps the whole table at once
// while packets flow, so each packet is routed by the old table or the
// new one, never a mix.
//
// A router adds no goroutine: it routes on the goroutine that pushes
// into it, reading its table without a lock.
type Router struct {
	name     string
	bySource bool       // match packets by source, not destination
	mu       sync.Mutex // orders Set; routing takes no lock
	compiled bool
	ids      []ID // the linked nodes, as Compile saw them
	outs     []impair.Sink
	routes   []Route // the routes before Compile
	table    atomic.Pointer[table]
	noRoute  atomic.Uint64
}

// Route sends packets for Prefix to the node To; an invalid (zero)
// Prefix makes the default route. Proto and Port, when not zero, narrow
// the route to packets of that IP protocol (6 TCP, 17 UDP) and
// destination port (see Match).
type Route struct {
	Prefix netip.Prefix
	Proto  uint8
	Port   uint16
	To     ID
}

// Match is what a route takes: packets to an address in Prefix (any
// address when it is invalid), of protocol Proto and to port Port (any
// when zero). Of several matches that take a packet, the most specific
// wins: the longest prefix, then one with a port, then one with a
// protocol; of equally specific ones, the first (see Pick).
type Match struct {
	Prefix netip.Prefix
	Proto  uint8
	Port   uint16
}

// Takes reports whether m takes a packet to addr, of proto, to port.
func (m Match) Takes(addr netip.Addr, proto uint8, port uint16) bool {
	return (!m.Prefix.IsValid() || m.Prefix.Contains(addr)) && (m.Proto == 0 || m.Proto == proto) && (m.Port == 0 || m.Port == port)
}

// specific orders matches from the most specific.
func specific(a, b Match) int {
	bits := func(m Match) int {
		if !m.Prefix.IsValid() {
			return -1
		}
		return m.Prefix.Bits()
	}
	set := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	return cmp.Or(cmp.Compare(bits(b), bits(a)), cmp.Compare(set(b.Port != 0), set(a.Port != 0)),
		cmp.Compare(set(b.Proto != 0), set(a.Proto != 0)))
}

// Pick returns the index of the match of ms that takes a packet to addr,
// of proto, to port (the most specific), or -1: what a router with these
// routes does with the packet.
func Pick(ms []Match, addr netip.Addr, proto uint8, port uint16) int {
	best := -1
	for i, m := range ms {
		if m.Takes(addr, proto, port) && (best < 0 || specific(m, ms[best]) < 0) {
			best = i
		}
	}
	return best
}

// table is an immutable set of routes, compiled to sinks.
type table struct {
	exact    map[netip.Addr]impair.Sink // single-address prefixes
	prefixes []prefixSink               // the rest, longest first
	def      impair.Sink
	// rules, when a route names a protocol or port, are every route,
	// the most specific first; exact, prefixes and def are then unused.
	rules []ruleSink
}

type ruleSink struct {
	m Match
	s impair.Sink
}

type prefixSink struct {
	p netip.Prefix
	s impair.Sink
}

// NewRouter returns a router with no routes.
func NewRouter(name string) *Router { return &Router{name: name} }

// NewSourceRouter returns a router with no routes that routes packets by
// their source address and source port: the replies of a path's server
// go back the path its requests took.
func NewSourceRouter(name string) *Router { return &Router{name: name, bySource: true} }

// Node returns the router as a node of a graph. It passes on whatever it
// is given: each edge out of it gets the steps its own node needs.
func (r *Router) Node() Node {
	return Node{Name: r.name, In: r, Accepts: Accepts{GSO: Yes, Partial: true}}
}

// NoRoute returns how many packets had no route.
func (r *Router) NoRoute() uint64 { return r.noRoute.Load() }

// Set makes routes the router's table, at once. Before Compile it only
// records them; after, every route must name a node the graph links the
// router to. On error nothing changes.
func (r *Router) Set(routes []Route) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.compiled {
		r.routes = slices.Clone(routes)
		return nil
	}
	t, err := r.build(routes)
	if err != nil {
		return err
	}
	r.table.Store(t)
	return nil
}

// compile takes the router's compiled edges, to the nodes ids.
func (r *Router) compile(ids []ID, sinks []impair.Sink) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids, r.outs, r.compiled = ids, sinks, true
	t, err := r.build(r.routes)
	if err != nil {
		return err
	}
	r.table.Store(t)
	return nil
}

func (r *Router) build(routes []Route) (*table, error) {
	t := &table{exact: map[netip.Addr]impair.Sink{}}
	rules := slices.ContainsFunc(routes, func(rt Route) bool { return rt.Proto != 0 || rt.Port != 0 })
	for _, rt := range routes {
		i := slices.Index(r.ids, rt.To)
		if i < 0 {
			return nil, fmt.Errorf("topology: router %q: a route to node %d, which it is not linked to", r.name, rt.To)
		}
		s := r.outs[i]
		if rules {
			p := rt.Prefix
			if p.IsValid() {
				p = p.Masked()
			}
			t.rules = append(t.rules, ruleSink{Match{p, rt.Proto, rt.Port}, s})
			continue
		}
		switch p := rt.Prefix; {
		case !p.IsValid():
			t.def = s
		case p.IsSingleIP():
			t.exact[p.Addr()] = s
		default:
			t.prefixes = append(t.prefixes, prefixSink{p.Masked(), s})
		}
	}
	slices.SortStableFunc(t.prefixes, func(a, b prefixSink) int { return cmp.Compare(b.p.Bits(), a.p.Bits()) })
	slices.SortStableFunc(t.rules, func(a, b ruleSink) int { return specific(a.m, b.m) })
	return t, nil
}

// Push routes p by its destination (or source) address, and protocol and
// port when a route names them.
func (r *Router) Push(now time.Time, p *impair.Packet) {
	if s := r.table.Load().lookup(p.Data, r.bySource); s != nil {
		s.Push(now, p)
		return
	}
	r.noRoute.Add(1)
	p.Release()
}

func (t *table) lookup(b []byte, bySource bool) impair.Sink {
	a, src := DstAddr(b), bySource
	if bySource {
		a = SrcAddr(b)
		// An ICMP error from a router on the way (its own address, which
		// no route names) goes back the way a reply to the packet it
		// quotes would: by that packet's destination.
		if q := Quoted(b); q != nil {
			b, a, src = q, DstAddr(q), false
		}
	}
	if len(t.rules) > 0 {
		proto, port := Transport(b, src)
		for _, r := range t.rules {
			if r.m.Takes(a, proto, port) {
				return r.s
			}
		}
		return nil
	}
	if s, ok := t.exact[a]; ok {
		return s
	}
	for _, ps := range t.prefixes {
		if ps.p.Contains(a) {
			return ps.s
		}
	}
	return t.def
}

// SrcAddr returns the source address of an IPv4 or IPv6 packet, or the
// zero Addr for anything else.
func SrcAddr(b []byte) netip.Addr {
	if len(b) == 0 {
		return netip.Addr{}
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) >= 20 {
			return netip.AddrFrom4([4]byte(b[12:16]))
		}
	case 6:
		if len(b) >= 40 {
			return netip.AddrFrom16([16]byte(b[8:24]))
		}
	}
	return netip.Addr{}
}

// Transport returns the IP protocol of a packet and its destination port
// (its source port when src), 0 when it has none: not TCP or UDP, a
// fragment other than the first, an IPv6 packet with extension headers,
// or too short.
func Transport(b []byte, src bool) (proto uint8, port uint16) {
	var off int
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		proto, off = b[9], int(b[0]&0xf)*4
		if b[6]&0x1f != 0 || b[7] != 0 { // a later fragment
			return proto, 0
		}
	case len(b) >= 40 && b[0]>>4 == 6:
		proto, off = b[6], 40
	default:
		return 0, 0
	}
	if proto != 6 && proto != 17 || len(b) < off+4 {
		return proto, 0
	}
	if src {
		return proto, uint16(b[off])<<8 | uint16(b[off+1])
	}
	return proto, uint16(b[off+2])<<8 | uint16(b[off+3])
}

// Quoted returns the packet an ICMP or ICMPv6 error message quotes
// (destination unreachable, time exceeded, parameter problem; for IPv6
// packet too big too), as far as it is quoted, or nil when b is no such
// message or quotes less than an IP header.
func Quoted(b []byte) []byte {
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		ihl := int(b[0]&0xf) * 4
		if b[9] != 1 || b[6]&0x1f != 0 || b[7] != 0 || ihl < 20 || len(b) < ihl+8+20 {
			return nil
		}
		switch b[ihl] {
		case 3, 4, 5, 11, 12: // unreachable, source quench, redirect, time exceeded, parameter problem
			return b[ihl+8:]
		}
	case len(b) >= 40 && b[0]>>4 == 6:
		if b[6] != 58 || len(b) < 40+8+40 {
			return nil
		}
		if t := b[40]; t >= 1 && t <= 4 { // unreachable, packet too big, time exceeded, parameter problem
			return b[48:]
		}
	}
	return nil
}

// DstAddr returns the destination address of an IPv4 or IPv6 packet, or
// the zero Addr for anything else.
func DstAddr(b []byte) netip.Addr {
	if len(b) == 0 {
		return netip.Addr{}
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) >= 20 {
			return netip.AddrFrom4([4]byte(b[16:20]))
		}
	case 6:
		if len(b) >= 40 {
			return netip.AddrFrom16([16]byte(b[24:40]))
		}
	}
	return netip.Addr{}
}
