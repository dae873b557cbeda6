package emulator

import (
	"net/netip"

	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
)

// With nodes netjam routes between kernels, and answers as routers do: a
// hop (topology.Hop) in front of each direction of each link decrements
// the TTL, answers an expired one with ICMP "time exceeded" (traceroute
// sees it) and a packet larger than the link's MTU with "fragmentation
// needed" or "packet too big" (path MTU discovery works). The hop in
// front of a link's uplink stands on the client's side of the link, so
// its errors go back the way the link's downlink leads on: across the
// links before it on the sender's path (the replies' routers choose by
// the packet an error quotes, see topology.Quoted), to the client's
// kernel, or through the hub and its link to a node that sent. The one
// in front of a downlink stands on the server side, so its errors go the
// way the link's uplink leads on. Each hop has an address of its own, from
// the top of the device's networks down: 10.99.0.254 in front of the
// first link's uplink, .253 its downlink, .252 the second link's uplink,
// and so on. A link between two nodes has one sender each way, so its
// hops' errors go straight back to it (betweenLinks).

// hops puts a hop in front of each link direction's entry (ins and
// outs: the uplinks' and downlinks' entries by link, changed to the
// hops) when s has nodes.
func (b *pathBuilder) hops(s *scenario.Scenario, upIn, downIn map[string]topology.ID) error {
	if len(s.Nodes) == 0 || s.TUN == nil {
		return nil
	}
	b.hopErrors = map[string][2]topology.ID{}
	for i, ls := range s.Links {
		for j, ins := range []map[string]topology.ID{upIn, downIn} {
			addrs := b.l.bp.Hops[i][j]
			name := "router before " + directionName(s, ls.Name, j == 0)
			h := topology.NewHop(name, ls.MTU, addrs, b.l.pool)
			id := b.g.Add(h.Node())
			b.g.Link(id, ins[ls.Name])
			ins[ls.Name] = id
			e := b.hopErrors[ls.Name]
			e[j] = b.g.Add(h.Errors())
			b.hopErrors[ls.Name] = e
			b.l.hops = append(b.l.hops, hopEnd{name: name, addrs: addrs, hop: h})
		}
	}
	return nil
}

// hopErrorsBack links the ICMP errors of the hops in front of each link
// of the paths (not of those between two nodes: betweenLinks) to where
// the link's other direction leads on (after, by link: the uplinks',
// the downlinks'), or to the side's router when no path crosses it.
func (b *pathBuilder) hopErrorsBack(s *scenario.Scenario, after [2]map[string]topology.ID) {
	if b.hopErrors == nil {
		return
	}
	for _, ls := range s.Links {
		if ls.Between != nil {
			continue
		}
		errs := b.hopErrors[ls.Name]
		// The uplink's hop sends back the way the downlink goes on.
		for j, to := range []topology.ID{b.toClient, b.toServer} {
			if next, ok := after[1-j][ls.Name]; ok && next >= 0 {
				to = next
			}
			b.g.Link(errs[j], to)
		}
	}
}

// hopEnd is a hop of the lab and its addresses.
type hopEnd struct {
	name  string
	addrs []netip.Addr
	hop   *topology.Hop
}

// hopSummaries returns what each hop counted.
func (l *lab) hopSummaries() []summary.RouterSummary {
	var out []summary.RouterSummary
	for _, h := range l.hops {
		rs := summary.RouterSummary{Name: h.name, HopStats: h.hop.Stats()}
		for _, a := range h.addrs {
			rs.Addresses = append(rs.Addresses, a.String())
		}
		out = append(out, rs)
	}
	return out
}
