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
// else to the default route's, else drops it (counted, NoRoute). Its
// routes are settings, not structure: the graph links the router to
// every node a route may name, and Set swaps the whole table at once
// while packets flow, so each packet is routed by the old table or the
// new one, never a mix.
//
// A router adds no goroutine: it routes on the goroutine that pushes
// into it, reading its table without a lock.
type Router struct {
	name     string
	mu       sync.Mutex // orders Set; routing takes no lock
	compiled bool
	ids      []ID // the linked nodes, as Compile saw them
	outs     []impair.Sink
	routes   []Route // the routes before Compile
	table    atomic.Pointer[table]
	noRoute  atomic.Uint64
}

// Route sends packets for Prefix to the node To; an invalid (zero)
// Prefix makes the default route.
type Route struct {
	Prefix netip.Prefix
	To     ID
}

// table is an immutable set of routes, compiled to sinks.
type table struct {
	exact    map[netip.Addr]impair.Sink // single-address prefixes
	prefixes []prefixSink               // the rest, longest first
	def      impair.Sink
}

type prefixSink struct {
	p netip.Prefix
	s impair.Sink
}

// NewRouter returns a router with no routes.
func NewRouter(name string) *Router { return &Router{name: name} }

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
	for _, rt := range routes {
		i := slices.Index(r.ids, rt.To)
		if i < 0 {
			return nil, fmt.Errorf("topology: router %q: a route to node %d, which it is not linked to", r.name, rt.To)
		}
		s := r.outs[i]
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
	return t, nil
}

// Push routes p by its destination address.
func (r *Router) Push(now time.Time, p *impair.Packet) {
	if s := r.table.Load().lookup(DstAddr(p.Data)); s != nil {
		s.Push(now, p)
		return
	}
	r.noRoute.Add(1)
	p.Release()
}

func (t *table) lookup(a netip.Addr) impair.Sink {
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
