package blueprint

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/netjam/netjam/scenario"
)

// addTUN adds the machines of TUN mode: the kernel's ends on the client
// side (one per station it sits behind, or one), and at the far end the
// peer or the nodes; with nodes, the routers' addresses.
func (n *Net) addTUN(s *scenario.Scenario) error {
	c := s.TUN
	if len(c.Stations) == 0 {
		n.Machines = append(n.Machines, Machine{Name: "kernel", Kind: Kernel, Index: -1, Node: -1, SACK: true, Addrs: slices.Clone(c.Device.Addrs)})
	}
	for j, name := range c.Stations {
		m := Machine{Name: "kernel " + name, Kind: Kernel, Index: -1, Node: -1, SACK: true, Station: name}
		for i, a := range c.StationAddrs[j] {
			m.Addrs = append(m.Addrs, netip.PrefixFrom(a, c.Device.Addrs[i].Bits()))
		}
		n.Machines = append(n.Machines, m)
	}
	peer := n.peerAddrs(s)
	if len(s.Nodes) == 0 {
		n.Machines = append(n.Machines, Machine{Name: "peer", Kind: Peer, Server: true, Index: -1, Node: -1, SACK: true, Addrs: peer,
			Transparent: c.Relay.Transparent, CatchAll: c.Relay.Transparent})
		return nil
	}
	for i, nd := range s.Nodes {
		m := Machine{Name: nd.Name, Kind: Node, Server: true, Index: -1, Node: i, SACK: true, Addrs: peer}
		if i > 0 {
			m.Addrs = nil
			for j, a := range nd.Addrs {
				m.Addrs = append(m.Addrs, netip.PrefixFrom(a, c.Device.Addrs[j].Bits()))
			}
		}
		n.Machines = append(n.Machines, m)
	}
	return n.hops(s)
}

// peerAddrs returns the peer's addresses (the first node's, with
// nodes): tun.peer's, in the device's networks, then its address on each
// path whose match has a dst, the network's first host address, as a
// lab's server of the path has (PathPeer). A path's network outside the
// device's is routed into the device (DeviceRoutes), so that the kernel's
// packets to it take the path: a delay matrix, ping 10.20.0.1 crossing
// to-eu and ping 10.99.0.2 the default path.
func (n *Net) peerAddrs(s *scenario.Scenario) []netip.Prefix {
	c := s.TUN
	var peer []netip.Prefix
	for _, a := range c.Device.Addrs {
		for _, p := range c.Peer {
			if p.Is4() == a.Addr().Is4() {
				peer = append(peer, netip.PrefixFrom(p, a.Bits()))
			}
		}
	}
	n.PathPeer, n.DeviceRoutes = map[string]netip.Addr{}, slices.Clone(c.Device.Routes)
	for _, p := range s.Paths {
		if p.Match == nil || !p.Match.Dst.IsValid() {
			continue
		}
		dst := p.Match.Dst
		a, ok := nthHost(dst, 0)
		if !ok {
			continue
		}
		n.PathPeer[p.Name] = a
		if !slices.ContainsFunc(peer, func(q netip.Prefix) bool { return q.Addr() == a }) {
			peer = append(peer, netip.PrefixFrom(a, dst.Bits()))
		}
		covered := slices.ContainsFunc(append(slices.Clone(c.Device.Addrs), n.DeviceRoutes...), func(q netip.Prefix) bool {
			return q.Bits() <= dst.Bits() && q.Masked().Contains(dst.Addr())
		})
		if !covered {
			n.DeviceRoutes = append(n.DeviceRoutes, dst)
		}
	}
	return peer
}

// peerOn returns the peer's (or the first node's) address on path p: the
// path's own (PathPeer), else its first.
func (n *Net) peerOn(p scenario.Path) netip.Addr {
	if a, ok := n.PathPeer[p.Name]; ok {
		return a
	}
	far := n.Machines[len(n.Machines)-1]
	for _, m := range n.Machines {
		if m.Kind == Peer || m.Kind == Node && m.Node == 0 {
			far = m
			break
		}
	}
	return far.Addrs[0].Addr()
}

// With nodes netjam routes between kernels, and answers as routers do:
// a router in front of each direction of each link. Each has an address
// of its own in each of the device's networks, from the top down:
// 10.99.0.254 in front of the first link's uplink, .253 its downlink,
// .252 the second link's uplink, and so on.

// hops gives the routers in front of the links their addresses.
func (n *Net) hops(s *scenario.Scenario) error {
	used := usedAddrs(s)
	for i := range s.Links {
		var h [2][]netip.Addr
		for j := range h {
			addrs, err := hopAddrs(s.TUN.Device.Addrs, 2*i+j, used)
			if err != nil {
				return err
			}
			h[j] = addrs
		}
		n.Hops = append(n.Hops, h)
	}
	return nil
}

// usedAddrs are the addresses of the device's networks that the kernel,
// its stations and the nodes hold.
func usedAddrs(s *scenario.Scenario) map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	for _, a := range s.TUN.Device.Addrs {
		used[a.Addr()] = true
	}
	for _, a := range s.TUN.Peer {
		used[a] = true
	}
	for _, sa := range s.TUN.StationAddrs {
		for _, a := range sa {
			used[a] = true
		}
	}
	for _, n := range s.Nodes {
		for _, a := range n.Addrs {
			used[a] = true
		}
	}
	return used
}

// hopAddrs returns hop k's address in each of nets: the k-th host address
// from the top of the network (the last is k = 0), refused when the
// kernel, a station or a node holds it.
func hopAddrs(nets []netip.Prefix, k int, used map[netip.Addr]bool) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, p := range nets {
		a := scenario.LastAddr(p.Masked())
		if a.Is4() {
			a = a.Prev() // the broadcast address is no host's
		}
		for range k {
			a = a.Prev()
		}
		if !a.IsValid() || !p.Contains(a) || used[a] || a == p.Masked().Addr() {
			return nil, fmt.Errorf("no address is left in %v for the routers in front of the links: give tun.address a larger network", p.Masked())
		}
		out = append(out, a)
	}
	return out, nil
}

// nodePaths are the paths of the nodes that name a link (nodes[].link):
// one per address, matching it, across that link alone. The lab routes
// by them as by the scenario's paths (the uplink's router by destination,
// the downlink's by source), and reports them nowhere.
func nodePaths(s *scenario.Scenario) []scenario.Path {
	var ps []scenario.Path
	for _, n := range s.Nodes {
		if n.Link == "" {
			continue
		}
		for _, a := range n.Addrs {
			ps = append(ps, scenario.Path{Name: "node " + n.Name, Via: []string{n.Link},
				Match: &scenario.Match{Dst: netip.PrefixFrom(a, a.BitLen())}})
		}
	}
	return ps
}
