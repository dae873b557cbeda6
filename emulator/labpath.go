package emulator

import (
	"net/netip"
	"slices"
	"time"

	"github.com/netjam/netjam/blueprint"
	"github.com/netjam/netjam/capture"
	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
	"github.com/netjam/netjam/topology"
)

// The lab's packet path is a topology.Graph, built here from the
// scenario and compiled before the run:
//
//	client tx ─▶ [tap] ─▶ [cell up ─▶ AP] ─▶ uplink ═▶ to-server ─▶ [tap] ─▶ inbox ═▶ server rx
//	client rx ◀═ inbox ◀─ [tap] ◀─ [station ◀═ cell down] ◀─ to-client ◀═ downlink ◀─ [tap] ◀─ server tx
//
// (═ a hand-over to another goroutine: a direction's, the cell's, an
// inbox's; the taps are the capture points; the builder adds the split,
// merge and checksum steps each edge needs.) In TUN mode the kernel's
// endpoints are a source fed by the device's read loop and the device's
// inbox, and the peer host takes the uplink's packets for any
// destination when transparent.
//
// With several links and paths (scenario.Path), "uplink" above is the
// paths' uplinks and "downlink" their downlinks: a router choosing the
// path by the packet (topology.Match) hands the client side's packets to
// their path's first link, and after each link a router hands them to
// their path's next link, the last link to to-server:
//
//	... ─▶ [paths] ─▶ access.uplink ─▶ [after access.uplink] ─▶ eu.uplink ─▶ to-server
//	                                                           └▶ us.uplink ─▶ to-server
//
// and replies, chosen by their source, cross the same links in reverse
// to to-client. A link several paths cross is one pair of directions,
// one queue each way: its bottleneck is shared. Where only one next hop
// is possible there is no router.

// pathBuilder builds a lab's graph.
type pathBuilder struct {
	l *lab
	g topology.Graph
	// up and down are where the client side's and the server side's
	// packets enter the paths (the path router, or the one path's first
	// direction); toServer and toClient the routers at their ends.
	up, down           topology.ID
	toServer, toClient topology.ID
	cell               *topology.Cell
	ap                 topology.ID // the cell's access point, with a cell
	// routes collects each router's routes until the graph is complete.
	routes map[*topology.Router][]topology.Route
	// upIn, upOut, downIn and downOut are where each link's uplink and
	// downlink are entered and left, by link name.
	upIn, upOut, downIn, downOut map[string]topology.ID
	// hopErrors are the ICMP errors of the routers in front of each
	// link, [uplink's, downlink's], by link name: linked back once the
	// paths are there (hopErrorsBack), or for a link between two nodes
	// once the nodes are (betweenLinks).
	hopErrors map[string][2]topology.ID
}

// newPathBuilder builds the path's directions, the routers at their ends
// and the Wi-Fi cell of s, with nothing yet at either end.
func newPathBuilder(l *lab, s *scenario.Scenario) (*pathBuilder, error) {
	b := &pathBuilder{l: l, routes: map[*topology.Router][]topology.Route{}}
	l.path = &Path{}
	// Each direction's node where packets enter it and whose output
	// leaves it: a tap in front and behind when its link's ends are
	// captured.
	upIn, upOut, downIn, downOut := map[string]topology.ID{}, map[string]topology.ID{}, map[string]topology.ID{}, map[string]topology.ID{}
	b.upIn, b.upOut, b.downIn, b.downOut = upIn, upOut, downIn, downOut
	for _, ls := range s.Links {
		lr := &LinkRun{Name: ls.Name}
		for i, r := range []**impair.Runner{&lr.Up, &lr.Down} {
			name, d := directionName(s, ls.Name, i == 0), ls.Uplink
			if i == 1 {
				d = ls.Downlink
			}
			cfg, err := directionConfig(name, s.Seed, d)
			if err != nil {
				return nil, err
			}
			dir, err := topology.NewDirection(cfg, l.clk)
			if err != nil {
				return nil, err
			}
			l.lives = append(l.lives, dir.Runner())
			*r = dir.Runner()
			id := b.g.Add(dir.Node())
			client, server := l.capLinks[ls.Name+".client"], l.capLinks[ls.Name+".server"]
			if i == 0 {
				upIn[ls.Name], upOut[ls.Name] = b.tap(client, name, id, true), b.tap(server, name, id, false)
			} else {
				downIn[ls.Name], downOut[ls.Name] = b.tap(server, name, id, true), b.tap(client, name, id, false)
			}
		}
		l.path.Links = append(l.path.Links, lr)
	}
	l.path.Up, l.path.Down = l.path.Links[0].Up, l.path.Links[0].Down
	l.routers = [2]*topology.Router{topology.NewRouter("to-server"), topology.NewRouter("to-client")}
	b.toServer, b.toClient = b.g.Add(l.routers[0].Node()), b.g.Add(l.routers[1].Node())
	if err := b.hops(s, upIn, downIn); err != nil {
		return nil, err
	}
	paths := b.l.bp.Paths
	var after [2]map[string]topology.ID
	b.up, after[0] = b.paths(s, paths, "paths", false, upIn, upOut, b.toServer)
	b.down, after[1] = b.paths(s, paths, "replies", true, downIn, downOut, b.toClient)
	b.hopErrorsBack(s, after)
	b.partitionEntries(s)
	if s.WiFi != nil {
		cfg := *s.WiFi // the scenario's cell, with the run's seed
		cfg.Seed = s.Seed
		c, err := topology.NewCell(cfg, l.clk)
		if err != nil {
			return nil, err
		}
		b.cell, l.cell = c, c.Runner()
		l.lives = append(l.lives, c.Runner())
		b.ap = b.g.Add(c.AP())
		b.g.Link(b.ap, b.up)
	}
	return b, nil
}

// directionName is the name of a direction of link: uplink and downlink
// for the link shorthand's (as before links, which keeps a seed's random
// streams), NAME.uplink and NAME.downlink for a links list's.
func directionName(s *scenario.Scenario, link string, up bool) string {
	name := "downlink"
	if up {
		name = "uplink"
	}
	if len(s.Links) == 1 && link == scenario.DefaultLink {
		return name
	}
	return link + "." + name
}

// tap returns the node of direction id (named dir) that packets enter
// (in) or leave by: id, or a tap of cw in front of it or behind it.
func (b *pathBuilder) tap(cw *capture.Writer, dir string, id topology.ID, in bool) topology.ID {
	if cw == nil {
		return id
	}
	where := "after "
	if in {
		where = "before "
	}
	t := b.g.Add(topology.NewTap("capture "+where+dir, heldWriter{cw, b.l.clk}, b.l.pool, b.l.bigPool).Node())
	if in {
		b.g.Link(t, id)
	} else {
		b.g.Link(id, t)
	}
	return t
}

// paths links the directions of one way along every path of paths (s's
// and its nodes'; ins:
// where each link's direction is entered, outs: where it is left, by
// link name), and returns the node the way's packets enter by: a router
// choosing their path (named name), or the one path's first direction;
// and where each link's direction leads on, by link name (-1: nowhere,
// no path crosses it).
// Uplinks (back false) go along each path's via to end; downlinks (back)
// go the other way, and their routers choose by source.
func (b *pathBuilder) paths(s *scenario.Scenario, paths []scenario.Path, name string, back bool, ins, outs map[string]topology.ID, end topology.ID) (topology.ID, map[string]topology.ID) {
	via := func(p scenario.Path) []string {
		v := slices.Clone(p.Via)
		if back {
			slices.Reverse(v)
		}
		return v
	}
	// hop links from (-1: the way's entry) to the next node of each path
	// next gives, through a router named label unless one node is
	// possible: after a link, what reaches it is its paths' only, chosen
	// in front; at the entry, when the one path takes every packet.
	hop := func(from topology.ID, label string, next func(p scenario.Path) (topology.ID, bool)) topology.ID {
		var rs []topology.Route
		var tos []topology.ID
		for _, p := range paths {
			to, ok := next(p)
			if !ok {
				continue
			}
			rs = append(rs, pathRoute(p, to))
			if !slices.Contains(tos, to) {
				tos = append(tos, to)
			}
		}
		takesAll := len(rs) == 1 && rs[0] == topology.Route{To: rs[0].To}
		switch {
		case len(tos) == 0:
			return -1 // a link no path crosses: the scenario refuses it
		case len(tos) == 1 && from >= 0:
			b.g.Link(from, tos[0])
			return tos[0]
		case len(tos) == 1 && takesAll:
			return tos[0]
		}
		r := topology.NewRouter(label)
		if back {
			r = topology.NewSourceRouter(label)
		}
		rid := b.g.Add(r.Node())
		if from >= 0 {
			b.g.Link(from, rid)
		}
		for _, o := range tos {
			b.g.Link(rid, o)
		}
		b.routes[r] = rs
		b.l.pathRouters = append(b.l.pathRouters, r)
		return rid
	}
	entry := hop(-1, name, func(p scenario.Path) (topology.ID, bool) { return ins[via(p)[0]], true })
	after := map[string]topology.ID{}
	for _, ls := range s.Links {
		after[ls.Name] = hop(outs[ls.Name], "after "+directionName(s, ls.Name, !back), func(p scenario.Path) (topology.ID, bool) {
			v := via(p)
			i := slices.Index(v, ls.Name)
			switch {
			case i < 0:
				return 0, false
			case i == len(v)-1:
				return end, true
			}
			return ins[v[i+1]], true
		})
	}
	return entry, after
}

// pathRoute is the route of path p to the node to: its match.
func pathRoute(p scenario.Path, to topology.ID) topology.Route {
	m := blueprint.PathMatch(p)
	return topology.Route{To: to, Prefix: m.Prefix, Proto: m.Proto, Port: m.Port}
}

// wire links from to to, through a tap of cw when that capture is on.
func (b *pathBuilder) wire(from, to topology.ID, cw *capture.Writer, name string) {
	if cw != nil {
		t := b.g.Add(topology.NewTap("capture "+name, heldWriter{cw, b.l.clk}, b.l.pool, b.l.bigPool).Node())
		b.g.Link(from, t)
		from = t
	}
	b.g.Link(from, to)
}

// route makes the router at r (rt) hand packets for prefixes to to,
// through a tap of cw when that capture is on. An invalid prefix makes
// the default route.
func (b *pathBuilder) route(r topology.ID, rt *topology.Router, prefixes []netip.Prefix, to topology.ID, cw *capture.Writer, name string) {
	if cw != nil {
		t := b.g.Add(topology.NewTap("capture "+name, heldWriter{cw, b.l.clk}, b.l.pool, b.l.bigPool).Node())
		b.g.Link(t, to)
		to = t
	}
	b.g.Link(r, to)
	for _, p := range prefixes {
		b.routes[rt] = append(b.routes[rt], topology.Route{Prefix: p, To: to})
	}
}

// heldWriter writes to a capture file with the clock held: the write may
// block in a system call, which a virtual clock must not take for the
// run being idle.
type heldWriter struct {
	w   *capture.Writer
	clk clock.Clock
}

func (h heldWriter) WritePacket(t time.Time, b []byte) error {
	clock.Hold(h.clk)
	defer clock.Release(h.clk)
	return h.w.WritePacket(t, b) // a full capture counts what it skips
}

// hostPrefixes returns each address as a route to it alone.
func hostPrefixes(addrs []netip.Addr) []netip.Prefix {
	ps := make([]netip.Prefix, len(addrs))
	for i, a := range addrs {
		ps[i] = netip.PrefixFrom(a, a.BitLen())
	}
	return ps
}

// inbox adds e's inbox and, behind it, rx taking what it hands on.
func (b *pathBuilder) inbox(e *endHost, rx topology.Node) topology.ID {
	e.in = topology.NewQueue(e.name+" inbox", inboxLen, inboxBytes, putWait)
	b.l.lives = append(b.l.lives, e.in)
	q := b.g.Add(e.in.Node())
	b.g.Link(q, b.g.Add(rx))
	return q
}

// addHost adds the ends of a netstack host: what it sends enters the
// downlink (a server), the cell as its station, or the uplink; what is for
// its addresses reaches it through its inbox. A netstack host sends large
// segments (host GSO, see newHost) and takes them whole when they crossed
// the path whole: split only where a node needs MTU-sized packets (a
// direction with a stage that decides per packet, the Wi-Fi medium). It
// is not handed merged segments (see newHost). It takes checksums left
// partial: the host completes them on the copy it makes anyway (see
// inject), and gVisor checks them.
func (b *pathBuilder) addHost(e *endHost, server bool) {
	l := b.l
	e.tx = topology.NewSource(e.name+" tx", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)
	tx := b.g.Add(e.tx.Node())
	e.txID = tx
	q := b.inbox(e, topology.Node{Name: e.name, In: topology.SinkFunc(e.inject), Accepts: topology.Accepts{GSO: topology.Varies, Whole: l.takeWhole, Partial: true}})
	switch {
	case server:
		b.wire(tx, b.down, l.capServer, e.name+" tx")
		prefixes := hostPrefixes(e.addrs)
		if e.catchAll {
			prefixes = append(prefixes, netip.Prefix{}) // the default route
		}
		b.route(b.toServer, l.routers[0], prefixes, q, l.capServer, e.name+" rx")
	case e.station != "":
		b.stationEnds(e.station, tx, q, e.addrs)
	default:
		b.wire(tx, b.up, l.capClient, e.name+" tx")
		b.route(b.toClient, l.routers[1], hostPrefixes(e.addrs), q, l.capClient, e.name+" rx")
	}
}

// addNodeHost adds the ends of a netstack node's host: what is for its
// addresses reaches it through its inbox, as a server host's; what it
// sends is joined once every node is there (joinNodes: its links
// between nodes, else the downlinks).
func (b *pathBuilder) addNodeHost(e *endHost) {
	l := b.l
	e.tx = topology.NewSource(e.name+" tx", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)
	e.txID = b.g.Add(e.tx.Node())
	q := b.inbox(e, topology.Node{Name: e.name, In: topology.SinkFunc(e.inject), Accepts: topology.Accepts{GSO: topology.Varies, Whole: l.takeWhole, Partial: true}})
	b.route(b.toServer, l.routers[0], hostPrefixes(e.addrs), q, l.capServer, e.name+" rx")
	l.joints = append(l.joints, &nodeJoint{name: e.name, end: e, tx: e.txID, rx: q})
}

// stationEnds links the client-side ends of Wi-Fi station name: what
// tx sends goes onto the medium, what reaches the station goes to the
// inbox q, and what the downlink has for addrs goes onto the medium.
func (b *pathBuilder) stationEnds(name string, tx, q topology.ID, addrs []netip.Addr) {
	l := b.l
	up, station := b.g.Add(b.cell.Uplink(name)), b.g.Add(b.cell.Station(name))
	b.wire(tx, up, l.capClient, name+" tx")
	b.wire(station, q, l.capClient, name+" rx")
	down := b.g.Add(b.cell.Downlink(name))
	b.g.Link(b.toClient, down)
	// The medium carries what enters it to the access point, or to the
	// station.
	b.g.Beyond(up, b.ap)
	b.g.Beyond(down, station)
	for _, p := range hostPrefixes(addrs) {
		b.routes[l.routers[1]] = append(b.routes[l.routers[1]], topology.Route{Prefix: p, To: down})
	}
}

// compile sets the routers' routes and compiles the graph.
func (b *pathBuilder) compile() (*topology.Net, error) {
	for r, routes := range b.routes {
		if err := r.Set(routes); err != nil {
			return nil, err
		}
	}
	return b.g.Compile(topology.Options{Pool: b.l.pool, Big: b.l.bigPool})
}

// takeWhole reports whether a netstack host takes the large segments
// that reach it whole, as one packet each: while no direction of the path
// drops or spoils packets by chance (impair.Config.Loses). Otherwise the
// graph splits them in front of the host, which then acknowledges them as
// it would the MTU-sized packets a path with a rate delivers one by one:
// every other one, and each one out of order. Taken whole, a large segment
// got one ACK for all its segments, and where ACKs are lost each loss cost
// the acknowledgment of tens of segments: with 5% loss each way and 10 ms
// round trips (reno, seeds 1 to 4, virtual clock) a path with no rate
// carried 4.97 to 6.07 Mbit/s with 1 to 6 timeouts where a rate it never
// reaches (hosts sending MTU-sized segments) carried 5.36 to 6.53 with 0
// to 6; taken split, 5.33 to 6.70 with 1 to 6 (issue 42). On a clean path
// the ACKs are fewer and nothing is lost for it, and the host's work per
// packet is what it saves.
func (l *lab) takeWhole() bool {
	for _, lr := range l.path.Links {
		if lr.Up.Loses() || lr.Down.Loses() {
			return false
		}
	}
	return true
}

// inject hands a packet to the host, a large segment whole, counted as
// its segments; a partial checksum the host takes as checked (as Linux
// takes a local sender's), without a pass over the packet.
//
// On a virtual clock it then waits until the host has taken the packet up
// (e.settle): gVisor's TCP takes what the host queued for it on its own
// goroutine, and an inbox handing it the packets of one instant one after
// another otherwise left it to the scheduler whether it found one queued
// or two, and so whether it acknowledged once or twice. Two runs of one
// seed parted there.
//
// A packet whose buffer is not much larger than it is lent to the host
// (stack.Host.InjectLent), which gives it back once done with its bytes;
// any other is copied and released here.
func (e *endHost) inject(_ time.Time, p *impair.Packet) {
	if p.Lendable() {
		e.host.InjectLent(p.Data, p, p.Segments(), p.Partial())
	} else {
		e.host.InjectSegments(p.Data, p.Segments(), p.Partial())
		p.Release()
	}
	e.settle.Settle()
}

// mergingEnd is the end of a host that takes what reached its inbox
// together merged, as a NIC's receive offload hands its host a run of
// segments (the peer, see peerEnds). Its inbox hands it each batch whole
// (PushBatch) instead of merging into packets of a pool first: each run
// Coalesce would merge goes to the host as its parts (Host.InjectRunLent),
// which the host keeps as they are where their buffers are not much larger
// than they are (impair.Packet.Lendable; the others it copies), taking the
// partial checksum as checked. A merged packet made first cost a copy of
// every byte, and completing its checksum (the node took no partial ones)
// a pass more.
// Push and PushBatch run on the inbox's goroutine only.
type mergingEnd struct {
	e *endHost
	// maxBytes is what the pool Coalesce would merge into holds: the
	// runs are the same.
	maxBytes int
	vec      [][]byte // PushBatch's own: no allocation per run
	own      []stack.Lender
}

// node returns m as the node behind an inbox that merges.
func (m *mergingEnd) node() topology.Node {
	return topology.Node{Name: m.e.name, In: m, Accepts: topology.Accepts{GSO: topology.Yes, Partial: true, Merged: true}}
}

// Push hands the host a packet as it is (see endHost.inject).
func (m *mergingEnd) Push(t time.Time, p *impair.Packet) { m.e.inject(t, p) }

// PushBatch hands the host ps, packets that reached the inbox together, in
// order: each run of segments of one connection (impair.CoalesceRun) as
// one packet standing for its segments, anything else as Push does.
func (m *mergingEnd) PushBatch(ps []*impair.Packet) {
	for len(ps) > 0 {
		n, segs, _, total := impair.CoalesceRun(ps, m.maxBytes)
		if n < 2 {
			m.e.inject(time.Time{}, ps[0])
			ps = ps[1:]
			continue
		}
		run := ps[:n]
		m.vec = impair.Gather(m.vec[:0], run, total)
		m.own = m.own[:0]
		for _, p := range run {
			if p.Lendable() {
				m.own = append(m.own, p)
			} else {
				m.own = append(m.own, nil)
			}
		}
		m.e.host.InjectRunLent(m.vec, m.own, segs)
		for i, p := range run {
			if m.own[i] == nil {
				p.Release()
			}
		}
		clear(m.vec)
		clear(m.own)
		m.e.settle.Settle()
		ps = ps[n:]
	}
}
