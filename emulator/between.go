package emulator

import "github.com/netjam/netjam/topology"

// A link between two nodes (scenario.Link.Between) joins them directly,
// beside the star of their links to the client's side: a delay matrix
// among nodes that is not a sum of two links. What the link's first
// node sends the second crosses its uplink, what the second sends the
// first its downlink:
//
//	a tx ─▶ [a's links] ─▶ partition ─▶ router ─▶ ab.uplink ─▶ b's inbox
//	                    └─▶ (anything else) the paths' downlinks, as without
//	b tx ─▶ [b's links] ─▶ partition ─▶ router ─▶ ab.downlink ─▶ a's inbox
//
// A node with such links sends through a router of its own ("a's
// links") that hands what is for the other end of one of them to its
// direction, through a partition filter (the hub's path has its own at
// the paths' entries), and anything else to the downlinks, as a node
// without one does. The router in front of each direction (a hop) sends
// its ICMP errors straight back to the direction's one sender.

// nodeJoint is a node as the graph joins it, of either kind: its name,
// its ends, its source (what it sends, not yet linked) and its inbox.
type nodeJoint struct {
	name   string
	end    *endHost
	tx, rx topology.ID
}

// betweenLinks links every node's source: into its links between nodes,
// when it has some, else into the downlinks; and each such link's
// directions to the nodes they reach.
func (b *pathBuilder) betweenLinks(nodes []*nodeJoint) {
	l := b.l
	byName := map[string]*nodeJoint{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	type router struct {
		r  *topology.Router
		id topology.ID
	}
	routers := map[*nodeJoint]router{}
	routerOf := func(n *nodeJoint) router {
		if r, ok := routers[n]; ok {
			return r
		}
		r := router{r: topology.NewRouter(n.name + "'s links")}
		r.id = b.g.Add(r.r.Node())
		b.wire(n.tx, r.id, l.capServer, n.name+" tx")
		b.g.Link(r.id, b.down)
		b.routes[r.r] = append(b.routes[r.r], topology.Route{To: b.down}) // the default route
		l.pathRouters = append(l.pathRouters, r.r)
		routers[n] = r
		return r
	}
	for _, ls := range l.s.Links {
		if ls.Between == nil {
			continue
		}
		first, second := byName[ls.Between[0]], byName[ls.Between[1]]
		errs := b.hopErrors[ls.Name]
		for j, dir := range []struct {
			from, to *nodeJoint
			in, out  map[string]topology.ID
		}{{first, second, b.upIn, b.upOut}, {second, first, b.downIn, b.downOut}} {
			r, name := routerOf(dir.from), directionName(l.s, ls.Name, j == 0)
			filter := b.g.Add(l.partition.filter("partition before " + name))
			b.g.Link(filter, dir.in[ls.Name])
			b.g.Link(r.id, filter)
			for _, p := range hostPrefixes(dir.to.end.addrs) {
				b.routes[r.r] = append(b.routes[r.r], topology.Route{Prefix: p, To: filter})
			}
			b.g.Link(dir.out[ls.Name], dir.to.rx)
			if len(l.hops) > 0 {
				b.g.Link(errs[j], dir.from.rx)
			}
		}
	}
	for _, n := range nodes {
		if _, ok := routers[n]; !ok {
			b.wire(n.tx, b.down, l.capServer, n.name+" tx")
		}
	}
}
