package blueprint

import (
	"fmt"
	"net/netip"

	"github.com/netjam/netjam/scenario"
)

// netstackHosts returns the netstack hosts the flows of s need: one per
// Wi-Fi station the kernel is not behind, in the cell's order, then a
// client (without a cell) per SACK setting and a server host per SACK
// setting and path, in the flows' order. gVisor switches SACK per stack,
// not per socket, so flows that differ in SACK run on different hosts.
func netstackHosts(s *scenario.Scenario) []Machine {
	var hs []Machine
	have := func(server, sack bool, path string) bool {
		for _, h := range hs {
			if h.Server == server && h.SACK == sack && h.Station == "" && h.Path == path {
				return true
			}
		}
		return false
	}
	if s.WiFi != nil {
		for _, st := range s.WiFi.Stations {
			if s.TUN != nil && s.TUN.Station(st.Name) >= 0 {
				continue // the kernel's end, see addTUN
			}
			sack := true
			for _, f := range s.Flows {
				if f.Station == st.Name && f.Type == "tcp" {
					sack = f.SACK
				}
			}
			hs = append(hs, Machine{Name: st.Name, SACK: sack, Station: st.Name})
		}
	}
	for _, f := range s.Flows {
		if f.Stack == scenario.StackKernel {
			continue // from the kernel to the peer or a node
		}
		if s.WiFi == nil && f.From == "" && !have(false, f.SACK, "") {
			hs = append(hs, Machine{SACK: f.SACK})
		}
		if p := s.FlowPath(f).Name; f.Node == "" && !have(true, f.SACK, p) {
			hs = append(hs, Machine{Server: true, SACK: f.SACK, Path: p})
		}
	}
	return hs
}

// addNetstackNodes adds the netstack nodes of s, hosts of the server
// side after the others (their numbers, and so their seeds, follow), at
// the addresses the scenario gave them, in the lab's networks.
func (n *Net) addNetstackNodes(s *scenario.Scenario) {
	i := 0
	for _, m := range n.Machines {
		if m.Kind == Netstack && m.Server {
			i++
		}
	}
	for k, nd := range s.Nodes {
		m := Machine{Name: nd.Name, Kind: Netstack, Server: true, Index: i, Node: k, SACK: true}
		for _, a := range nd.Addrs {
			bits := 24
			if a.Is6() {
				bits = 64
			}
			m.Addrs = append(m.Addrs, netip.PrefixFrom(a, bits))
		}
		n.Machines = append(n.Machines, m)
		i++
	}
}

// addHost adds netstack host h, the next of its side: client<i> or
// server<i> unless named, with its side's addresses, or, a server of a
// path whose match has a dst, the next host address of that network.
func (n *Net) addHost(s *scenario.Scenario, h Machine) error {
	i := 0
	for _, m := range n.Machines {
		if m.Kind == Netstack && m.Server == h.Server {
			i++
		}
	}
	if i == maxHosts {
		return fmt.Errorf("more than %d hosts on a side", maxHosts)
	}
	h.Kind, h.Index, h.Node = Netstack, i, -1
	if h.Name == "" {
		h.Name = fmt.Sprintf("client%d", i)
		if h.Server {
			h.Name = fmt.Sprintf("server%d", i)
		}
	}
	h.Addrs = hostAddrsMTU(i, h.Server, s.MTU)
	if p := pathNamed(s, h.Path); h.Server && p.Match != nil && p.Match.Dst.IsValid() {
		a, err := n.pathAddr(s, p)
		if err != nil {
			return err
		}
		h.Addrs = []netip.Prefix{a}
	}
	n.Machines = append(n.Machines, h)
	return nil
}

// pathNamed returns the path of s named name (the zero Path: none).
func pathNamed(s *scenario.Scenario, name string) scenario.Path {
	for _, p := range s.Paths {
		if p.Name == name {
			return p
		}
	}
	return scenario.Path{}
}

// pathAddr returns the address of the next server host of path p, whose
// match has a dst: the network's first host addresses, in order (the
// network's own address is skipped unless it is the only one), after the
// first in TUN mode, which is the peer's (see addTUN).
func (n *Net) pathAddr(s *scenario.Scenario, p scenario.Path) (netip.Prefix, error) {
	k := 0
	if s.TUN != nil {
		k = 1
	}
	for _, m := range n.Machines {
		if m.Server && m.Path == p.Name {
			k++
		}
	}
	dst := p.Match.Dst
	a, ok := nthHost(dst, k)
	if !ok {
		return netip.Prefix{}, fmt.Errorf("path %s: its dst %s has no room for %d hosts (one per sack setting of its flows, and the peer in TUN mode)", p.Name, dst, k+1)
	}
	return netip.PrefixFrom(a, dst.Bits()), nil
}

// nthHost returns host address k (from 0) of network dst: its addresses
// in order after the network's own (which is taken only when it is one of
// at most two); false when dst has no more.
func nthHost(dst netip.Prefix, k int) (netip.Addr, bool) {
	a := dst.Addr()
	if dst.Bits() < a.BitLen()-1 {
		a = a.Next()
	}
	for range k {
		a = a.Next()
	}
	return a, a.IsValid() && dst.Contains(a)
}

// checkPathNets refuses a path of s whose dst holds addresses the lab
// gives its client side (HostAddrs' networks) or, in TUN mode, the
// kernel's or the peer's own: its servers (or the peer on it) would take
// the first of them.
func checkPathNets(s *scenario.Scenario) error {
	taken := HostAddrs(0, false)
	if s.TUN != nil {
		taken = append(taken, s.TUN.Device.Addrs...)
		for _, a := range s.TUN.Peer {
			taken = append(taken, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	for _, p := range s.Paths {
		if p.Match == nil || !p.Match.Dst.IsValid() {
			continue
		}
		for _, t := range taken {
			if p.Match.Dst.Overlaps(t.Masked()) && (t.Bits() != t.Addr().BitLen() || p.Match.Dst.Contains(t.Addr())) {
				return fmt.Errorf("path %s: its dst %s overlaps %s, the lab's own (the client side's, or the TUN device's); give it another network", p.Name, p.Match.Dst, t.Masked())
			}
		}
	}
	return nil
}
