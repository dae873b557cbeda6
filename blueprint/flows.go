package blueprint

import (
	"fmt"

	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/topology"
)

// flows gives each flow of s its ends, addresses and port, and refuses
// a netstack flow whose packets would take another path than its own.
func (n *Net) flows(s *scenario.Scenario) error {
	for i, f := range s.Flows {
		fl := Flow{Client: -1, Server: -1, Port: serverPort(s, i, f)}
		if f.Stack == scenario.StackKernel {
			n.kernelFlow(s, f, &fl)
		} else {
			n.netstackFlow(s, f, &fl)
		}
		if fl.Client < 0 || fl.Server < 0 {
			return fmt.Errorf("flow %s: no host for it (the hosts were given)", f.Name)
		}
		n.Flows = append(n.Flows, fl)
	}
	return n.checkFlowPaths(s)
}

// netstackFlow finds netstack flow f's hosts: its station's, or the wired
// client host of its SACK setting, and the server host of its SACK
// setting and path. It connects to the server's first address (up) or
// from it to the client's of that family (down: a path whose dst is
// IPv6 gives its servers an IPv6 address only).
func (n *Net) netstackFlow(s *scenario.Scenario, f scenario.Flow, fl *Flow) {
	path := s.FlowPath(f).Name
	for i, m := range n.Machines {
		node := m.Node >= 0 && m.Kind == Netstack
		switch {
		case m.Kind != Netstack:
		case node && f.From == m.Name:
			fl.Client = i
		case node && f.Node == m.Name:
			fl.Server = i
		case node:
		case f.From == "" && !m.Server && fl.Client < 0 && (f.Station != "" && m.Station == f.Station || f.Station == "" && m.Station == "" && m.SACK == f.SACK):
			fl.Client = i
		case f.Node == "" && m.Server && fl.Server < 0 && m.SACK == f.SACK && m.Path == path:
			fl.Server = i
		}
	}
	if fl.Client >= 0 && fl.Server >= 0 {
		fl.ServerAddr = n.Machines[fl.Server].Addrs[0].Addr()
		fl.ClientAddr = n.Machines[fl.Client].Addr(fl.ServerAddr)
	}
}

// kernelFlow finds kernel flow f's ends: the kernel's end of its station
// (or the wired one), sending from its first address; the peer, on its
// address on the flow's path, or the flow's node (the first node when
// it names none), on its address of the kernel's family.
func (n *Net) kernelFlow(s *scenario.Scenario, f scenario.Flow, fl *Flow) {
	kernels := n.Kinds(Kernel)
	if len(kernels) == 0 {
		return
	}
	fl.Client = kernels[max(0, s.TUN.Station(f.Station))]
	fl.ClientAddr = n.Machines[fl.Client].Addrs[0].Addr()
	fl.ServerAddr = n.peerOn(s.FlowPath(f))
	for i, m := range n.Machines {
		switch {
		case m.Kind == Peer:
			fl.Server = i
		case m.Kind == Node && f.Node == "" && m.Node == 0:
			fl.Server = i
		case m.Kind == Node && f.Node != "" && m.Name == f.Node:
			fl.Server = i
			fl.ServerAddr = m.Addr(fl.ClientAddr)
		}
	}
}

// serverPort returns the server-side port of flow number i, f, of s: its
// path's match's port, else flowPort's.
func serverPort(s *scenario.Scenario, i int, f scenario.Flow) uint16 {
	if m := s.FlowPath(f).Match; m != nil && m.Port != 0 {
		return m.Port
	}
	return flowPort(s, i)
}

// flowPort returns the port of flow number i: 5001 + i, or the next one
// up that the TUN's forwards and services leave free on the peer.
func flowPort(s *scenario.Scenario, i int) uint16 {
	taken := map[uint16]bool{}
	if s.TUN != nil {
		for _, f := range s.TUN.Relay.Forwards {
			taken[f.Listen] = true
		}
	}
	port := uint16(5001)
	for n := 0; ; port++ {
		if taken[port] {
			continue
		}
		if n == i {
			return port
		}
		n++
	}
}

// PathMatches returns the topology matches of the paths of s, in order:
// what the paths' routers choose by.
func PathMatches(s *scenario.Scenario) []topology.Match {
	ms := make([]topology.Match, len(s.Paths))
	for i, p := range s.Paths {
		ms[i] = PathMatch(p)
	}
	return ms
}

// PathMatch is what path p takes, as a router matches it: its match's
// dst, proto and port (the zero Match, every packet, for the default
// path).
func PathMatch(p scenario.Path) topology.Match {
	var m topology.Match
	if pm := p.Match; pm != nil {
		m.Prefix, m.Port = pm.Dst, pm.Port
		m.Proto = ProtoNumber(pm.Proto)
	}
	return m
}

// ProtoNumber is the IP protocol number of "tcp" or "udp", 0 for "".
func ProtoNumber(proto string) uint8 {
	switch proto {
	case "tcp":
		return 6
	case "udp":
		return 17
	}
	return 0
}

// checkFlowPaths refuses a netstack flow of s whose packets the paths'
// routers would send along another path than the flow's: a server of
// the default path inside another path's dst, say.
func (n *Net) checkFlowPaths(s *scenario.Scenario) error {
	if len(s.Paths) < 2 && (len(s.Paths) == 0 || s.Paths[0].Match == nil) {
		return nil
	}
	ms := PathMatches(s)
	for i, f := range s.Flows {
		if f.Stack == scenario.StackKernel || f.Node != "" {
			continue // to a node: its own path
		}
		server := n.Machines[n.Flows[i].Server].Addrs[0].Addr()
		port := n.Flows[i].Port
		if f.Direction == "down" {
			port = 0 // the server sends from a port of its own
		}
		want := s.FlowPath(f).Name
		got := "no path"
		if j := topology.Pick(ms, server, ProtoNumber(f.Type), port); j >= 0 {
			got = "path " + s.Paths[j].Name
		}
		if got != "path "+want {
			return fmt.Errorf("flow %s: its packets (%s to %s, port %d) would take %s, not its path %s: give the paths matches that tell them apart",
				f.Name, f.Type, server, port, got, want)
		}
	}
	return nil
}
