package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netjam/netjam/impair"
)

// Support says whether a node's input takes whole GSO packets (large TCP
// segments standing for several MTU-sized ones; see impair.Packet.SetGSO).
type Support uint8

const (
	// No: MTU-sized packets only; the builder splits GSO packets in
	// front of the node, on the goroutine of whatever pushes into it.
	No Support = iota
	// Yes: GSO packets whole.
	Yes
	// Varies: Accepts.Whole says, per packet: a direction takes them
	// whole while its stages can decide on their segments, and its
	// settings may change while it runs (impair.Runner.TakesSegments).
	Varies
)

// Accepts is what a node's input takes; the builder adapts every edge
// into it to this.
type Accepts struct {
	GSO Support
	// Whole reports, for GSO Varies, whether GSO packets are taken whole
	// now. It is called once per GSO packet and must be cheap and safe
	// on any goroutine.
	Whole func() bool
	// Partial: the node takes TCP checksums left partial by a sender
	// with checksum offload (impair.Packet.Partial), as a device with
	// offload does or a stage that never reads them. When false the
	// builder completes them first: the node checks them.
	Partial bool
	// Merged: the node wants the segments of one connection that arrive
	// together merged into one GSO packet, as a NIC's receive offload
	// (GRO) hands them to a kernel. Only a Queue sees what arrives
	// together, so such a node must be fed by queues only, and take GSO
	// packets (GSO Yes).
	Merged bool
}

// Emits is what may leave a node besides what it passes on: for a source
// (a node without input), everything that may leave it.
type Emits struct {
	// GSO: GSO packets (a sender with segmentation offload).
	GSO bool
	// Partial: packets whose TCP checksum is partial.
	Partial bool
}

func (e Emits) or(f Emits) Emits { return Emits{e.GSO || f.GSO, e.Partial || f.Partial} }

// Life is a node's lifecycle, when it owns a goroutine: Start launches
// it, Close stops it and releases what it holds (idempotent).
type Life interface {
	Start(ctx context.Context)
	Close()
}

// Node is one element of the graph, as data: the builder reads it and
// never calls into it before the run, except to set its Out.
type Node struct {
	// Name identifies the node in errors and in the compiled graph's
	// description; unique in a graph.
	Name string
	// In takes the packets the node receives; nil for a source. What a
	// node is pushed it owns (forwards, holds or releases).
	In impair.Sink
	// Accepts is what In takes.
	Accepts Accepts
	// Out is where the node forwards packets; nil for a sink. The
	// builder points it at the next node (through the steps the edge
	// needs).
	Out *Port
	// Emits is what may leave Out besides what In took.
	Emits Emits
	// Life, when not nil, is started and closed with the graph (see
	// Net.Start and Net.Close). Several nodes may share one (a Wi-Fi
	// cell's ports); it is started and closed once.
	Life Life
}

// Port is a node's output. It forwards to what the compiled graph points
// it at; before that, and for a port left unlinked, pushing panics: the
// builder refuses a graph with an unlinked port.
type Port struct{ next impair.Sink }

// Push forwards p to the next node.
func (o *Port) Push(now time.Time, p *impair.Packet) { o.next.Push(now, p) }

// ID names a node of a Graph.
type ID int

// Graph is a topology as data: nodes and the edges between them. It is
// compiled (Compile) into a Net of direct calls.
type Graph struct {
	nodes []Node
	outs  [][]ID // outs[i]: the nodes i's output feeds, in the order linked
	// beyond[i]: the nodes what i takes reaches by a way of its own (see
	// Beyond).
	beyond [][]ID
	errs   []error
}

// Add adds n and returns its ID.
func (g *Graph) Add(n Node) ID {
	for _, m := range g.nodes {
		if m.Name == n.Name {
			g.errs = append(g.errs, fmt.Errorf("topology: two nodes named %q", n.Name))
		}
	}
	g.nodes = append(g.nodes, n)
	g.outs = append(g.outs, nil)
	g.beyond = append(g.beyond, nil)
	return ID(len(g.nodes) - 1)
}

// Beyond declares that what node from takes reaches node to by a way of
// its own, not an edge of the graph: a Wi-Fi cell's medium takes a
// station's packets at one node and hands them on from another (the
// access point). Compile ignores it; the graph's questions (Whole)
// follow it.
func (g *Graph) Beyond(from, to ID) {
	if !g.valid(from) || !g.valid(to) {
		g.errs = append(g.errs, fmt.Errorf("topology: beyond %d -> %d: no such node", from, to))
		return
	}
	g.beyond[from] = append(g.beyond[from], to)
}

// Link makes from's output feed to's input. A node's output feeds one
// node, except a router's, which feeds every node linked to it by its
// routes (see Router).
func (g *Graph) Link(from, to ID) {
	if !g.valid(from) || !g.valid(to) {
		g.errs = append(g.errs, fmt.Errorf("topology: link %d -> %d: no such node", from, to))
		return
	}
	g.outs[from] = append(g.outs[from], to)
}

// Chain links each node to the next: a path in series.
func (g *Graph) Chain(ids ...ID) {
	for i := 1; i < len(ids); i++ {
		g.Link(ids[i-1], ids[i])
	}
}

func (g *Graph) valid(id ID) bool { return id >= 0 && int(id) < len(g.nodes) }

// Whole returns a report of whether a GSO packet leaving node from now
// crosses, whole, every node it may reach on its way to a receiver: a
// sender asks it before it sends large segments (a host with
// segmentation offload chooses per connection), since a segment split
// on the way arrives as its parts anyway, and a sender handing over a
// window in a few calls would outrun a node that takes it packet by
// packet. It is false at once when a node on the way never takes GSO
// packets (a Wi-Fi medium), else true while every node whose support
// varies takes them (Accepts.Whole: a direction while none of its stages
// decides per packet). The receivers themselves, the nodes that forward
// nothing, are not asked: what they take is theirs to say (a split in
// front of them). Call it on the complete graph; the report is safe on
// any goroutine.
func (g *Graph) Whole(from ID) func() bool {
	if !g.valid(from) {
		return func() bool { return false }
	}
	var whole []func() bool
	never := false
	seen := map[ID]bool{from: true}
	next := slices.Clone(g.outs[from])
	for len(next) > 0 {
		id := next[len(next)-1]
		next = next[:len(next)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		n := g.nodes[id]
		if _, router := n.In.(*Router); len(g.outs[id]) == 0 && len(g.beyond[id]) == 0 && !router {
			continue // a receiver
		}
		switch n.Accepts.GSO {
		case No:
			never = true
		case Varies:
			whole = append(whole, n.Accepts.Whole)
		}
		next = append(append(next, g.outs[id]...), g.beyond[id]...)
	}
	if never {
		return func() bool { return false }
	}
	return func() bool {
		for _, w := range whole {
			if !w() {
				return false
			}
		}
		return true
	}
}

// Options are what the inserted steps need.
type Options struct {
	// Pool holds MTU-sized packets: the segments of a split.
	Pool *impair.Pool
	// Big holds GSO packets: the result of a merge.
	Big *impair.Pool
}

// Net is a compiled graph. Its nodes run on their own goroutines once
// started; every edge is a direct call.
type Net struct {
	desc  []string
	lives []Life // sources first
}

// String describes the compiled graph, one edge a line with the steps
// the builder put on it: "host -> split -> uplink".
func (n *Net) String() string { return strings.Join(n.desc, "\n") }

// Start starts every node with a Life, the last nodes of the path first,
// so that each runs before anything reaches it.
func (n *Net) Start(ctx context.Context) {
	for i := len(n.lives) - 1; i >= 0; i-- {
		n.lives[i].Start(ctx)
	}
}

// Close closes every node with a Life, sources first, so that no node
// forwards into one already closed (what it would have forwarded is
// counted by the node it was for, as flushed). Safe to call more than
// once.
func (n *Net) Close() {
	for _, l := range n.lives {
		l.Close()
	}
}

// Compile checks g and turns it into direct calls: it points every Port
// at the next node through the steps that adapt the edge, and, for a node
// that wants merged segments, tells the queues in front of it to merge.
// Every error is reported at once.
func (g *Graph) Compile(o Options) (*Net, error) {
	errs := append([]error(nil), g.errs...)
	order, err := g.order()
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, g.check()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if o.Pool == nil || o.Big == nil {
		return nil, errors.New("topology: Compile needs both pools")
	}
	net := &Net{}
	flow := make([]Emits, len(g.nodes)) // what may leave each node
	for _, i := range order {
		n := g.nodes[i]
		flow[i] = flow[i].or(n.Emits)
		if n.Life != nil && !hasLife(net.lives, n.Life) {
			net.lives = append(net.lives, n.Life)
		}
		r, router := n.In.(*Router)
		if len(g.outs[i]) == 0 && !router {
			continue
		}
		q, _ := n.In.(*Queue)
		var sinks []impair.Sink
		for _, to := range g.outs[i] {
			m := g.nodes[to]
			f := flow[i]
			if m.Accepts.Merged {
				q.merge = o.Big
				f = Emits{GSO: true, Partial: true}
				g.holders(i, q, map[ID]bool{})
			}
			s, steps := adapt(m, f, o.Pool)
			if b, ok := s.(batcher); ok && q != nil && q.merge != nil {
				q.batch = b // no step between: it merges itself
			}
			sinks = append(sinks, s)
			flow[to] = flow[to].or(passes(m, f))
			net.desc = append(net.desc, strings.Join(append(append([]string{n.Name}, steps...), m.Name), " -> "))
		}
		if router {
			if err := r.compile(g.outs[i], sinks); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		n.Out.next = sinks[0]
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return net, nil
}

// holders gives merging queue q to the directions that feed node i
// (q's own node, first) on their goroutines: through nodes that forward
// on the pusher's goroutine (routers, taps), not through another queue, a
// Wi-Fi cell or a source. They hold q during each pass (see Direction),
// so that what one pass delivers reaches q together.
func (g *Graph) holders(i ID, q *Queue, seen map[ID]bool) {
	for from, outs := range g.outs {
		if seen[ID(from)] || !slices.Contains(outs, i) {
			continue
		}
		seen[ID(from)] = true
		n := g.nodes[from]
		switch d, ok := n.In.(*Direction); {
		case ok:
			if !slices.Contains(d.held, q) {
				d.held = append(d.held, q)
			}
		case n.In != nil && n.Life == nil:
			g.holders(ID(from), q, seen)
		}
	}
}

func hasLife(ls []Life, l Life) bool {
	for _, m := range ls {
		if m == l {
			return true
		}
	}
	return false
}

// passes returns what a node taking f (before its edge's steps) may
// forward: GSO packets only if it takes them whole, partial checksums
// only if it takes them.
func passes(m Node, f Emits) Emits {
	return Emits{GSO: f.GSO && m.Accepts.GSO != No, Partial: f.Partial && m.Accepts.Partial}
}

// adapt returns the sink for an edge into m that carries f, and the names
// of the steps it put in front of m's input, in packet order.
func adapt(m Node, f Emits, pool *impair.Pool) (impair.Sink, []string) {
	s, steps := m.In, []string(nil)
	if f.Partial && !m.Accepts.Partial {
		s, steps = finish{s}, append(steps, "finish")
	}
	if f.GSO {
		switch m.Accepts.GSO {
		case No:
			s, steps = &split{pool, s}, append([]string{"split"}, steps...)
		case Varies:
			s, steps = &splitUnless{split{pool, s}, m.Accepts.Whole}, append([]string{"split?"}, steps...)
		}
	}
	if m.Accepts.Merged {
		steps = append([]string{"merge"}, steps...) // in the queue, before the rest
	}
	return s, steps
}

// order returns the nodes in topological order (every node after all
// that feed it), or an error naming the nodes on a cycle.
func (g *Graph) order() ([]ID, error) {
	ins := make([]int, len(g.nodes))
	for _, outs := range g.outs {
		for _, to := range outs {
			ins[to]++
		}
	}
	var order, ready []ID
	for i := range g.nodes {
		if ins[i] == 0 {
			ready = append(ready, ID(i))
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, to := range g.outs[i] {
			if ins[to]--; ins[to] == 0 {
				ready = append(ready, to)
			}
		}
	}
	if len(order) == len(g.nodes) {
		return order, nil
	}
	var cyc []string
	for i, n := range ins {
		if n > 0 {
			cyc = append(cyc, g.nodes[i].Name)
		}
	}
	return nil, fmt.Errorf("topology: a cycle through %s", strings.Join(cyc, ", "))
}

// check returns every error in the graph's shape.
func (g *Graph) check() []error {
	var errs []error
	fail := func(n Node, format string, a ...any) {
		errs = append(errs, fmt.Errorf("topology: node %q: "+format, append([]any{n.Name}, a...)...))
	}
	fed := make([][]ID, len(g.nodes)) // the nodes feeding each
	for i, outs := range g.outs {
		for _, to := range outs {
			fed[to] = append(fed[to], ID(i))
		}
	}
	for i, n := range g.nodes {
		_, router := n.In.(*Router)
		outs := g.outs[i]
		switch {
		case n.Out == nil && !router && len(outs) > 0:
			fail(n, "has no output")
		case n.Out != nil && len(outs) == 0: // a router without routes drops all, counted
			fail(n, "its output leads nowhere")
		case len(outs) > 1 && !router:
			fail(n, "feeds %d nodes; only a router feeds more than one", len(outs))
		}
		if len(fed[i]) > 0 && n.In == nil {
			fail(n, "is fed but has no input")
		}
		a := n.Accepts
		if a.GSO == Varies && a.Whole == nil {
			fail(n, "takes GSO packets now and then but says not when (Accepts.Whole)")
		}
		if a.Merged && a.GSO != Yes {
			fail(n, "wants merged segments but does not take GSO packets")
		}
		for _, from := range fed[i] {
			if _, ok := g.nodes[from].In.(*Queue); a.Merged && !ok {
				fail(n, "wants merged segments but is fed by %q, not a queue", g.nodes[from].Name)
			}
		}
	}
	return errs
}

// split hands on the segments of a GSO packet (and any other packet as
// it is): in front of a node that takes MTU-sized packets only.
type split struct {
	pool *impair.Pool
	next impair.Sink
}

func (s *split) Push(now time.Time, p *impair.Packet) { s.pool.SplitTo(now, p, s.next) }

// splitUnless splits unless the next node takes GSO packets whole now.
type splitUnless struct {
	split
	whole func() bool
}

func (s *splitUnless) Push(now time.Time, p *impair.Packet) {
	if p.Segments() > 1 && !s.whole() {
		s.pool.SplitTo(now, p, s.next)
		return
	}
	s.next.Push(now, p)
}

// finish completes a partial checksum: in front of a node that checks it.
type finish struct{ next impair.Sink }

func (f finish) Push(now time.Time, p *impair.Packet) {
	p.FinishChecksum()
	f.next.Push(now, p)
}
