// Package blueprint compiles a validated scenario into the network a run
// builds, as plain data: every machine at either end of the path with its
// kind and addresses, the routers in front of the links and their
// addresses, the routes (paths) across the links, and each flow's two
// ends and port. The emulator then instantiates it: netstack hosts, the
// TUN device, the nodes' namespaces, the topology graph of the links.
//
// Everything a run decides about its network before it starts is decided
// here once, and checked here (a path's servers outside the client side's
// network, a flow's packets taking its own path), so that building the
// run no longer consults the scenario for it, and the decisions are
// tested exactly without a network stack. Nothing here opens, starts or
// runs anything; the package is free of gVisor.
package blueprint

import (
	"fmt"
	"net/netip"

	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
)

// Kind is what a machine is.
type Kind uint8

const (
	// Netstack is a gVisor host in netjam's own process (the lab's hosts,
	// a bench's).
	Netstack Kind = iota
	// Kernel is the machine's kernel behind the TUN device, on the client
	// side: one machine per Wi-Fi station it sits behind, or one.
	Kernel
	// Peer is the netstack host at the far end of the TUN device's path,
	// relaying to real servers: a scenario with a tun section and no
	// nodes has it.
	Peer
	// Node is a node (scenario.Node): a kernel of its own in a namespace
	// of netjam's, at the far end of the TUN device's path.
	Node
)

func (k Kind) String() string {
	switch k {
	case Netstack:
		return "netstack"
	case Kernel:
		return "kernel"
	case Peer:
		return "peer"
	case Node:
		return "node"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Machine is one end of the path: what sends into it and receives from
// it.
type Machine struct {
	// Name names it in logs, the summary and the graph: client0,
	// server1, a station's name, kernel (or "kernel STATION"), peer, a
	// node's name.
	Name string
	Kind Kind
	// Server is true on the far side of the links (the server side's
	// hosts, the peer, the nodes), false on the client side.
	Server bool
	// Index is a netstack host's number among the netstack hosts of its
	// side, from 0 (its seed's); -1 for the other kinds.
	Index int
	// Addrs are its addresses with their networks' lengths: the first an
	// IPv4 one unless the machine has IPv6 only (a path whose dst is
	// IPv6). A station's kernel, a node: one per address of the device.
	Addrs []netip.Prefix
	// SACK is a netstack host's SACK setting (gVisor's is per host);
	// true for the kernels' ends.
	SACK bool
	// Station is the Wi-Fi station it sits behind; "" for a wired one.
	Station string
	// Path is, for a server-side netstack host, the path it ends.
	Path string
	// Transparent makes a netstack host take any destination (a bench's
	// relay); CatchAll routes it the uplink's packets for destinations no
	// machine owns.
	Transparent, CatchAll bool
	// Node is a node's scenario.Node (its index in Scenario.Nodes): a
	// kernel node's (kind Node) or a netstack node's (kind Netstack); -1
	// for the other machines.
	Node int
}

// Addr returns m's first address of a's family, else its first.
func (m *Machine) Addr(a netip.Addr) netip.Addr {
	for _, p := range m.Addrs {
		if p.Addr().Is4() == a.Is4() {
			return p.Addr()
		}
	}
	return m.Addrs[0].Addr()
}

// Net is a compiled scenario.
type Net struct {
	// Machines are the netstack hosts, in the order Hosts gave them or
	// the flows need them (see Compile), then the kernel's ends, then the
	// peer or the nodes in the scenario's order.
	Machines []Machine
	// Paths are the routes across the links: the scenario's, then one
	// per address of each node that names a link (nodes[].link), across
	// that link alone, matching the address. Nodes' paths are for
	// routing only, reported nowhere.
	Paths []scenario.Path
	// Hops holds, with nodes, the addresses of the routers in front of
	// each link of Scenario.Links: [uplink's, downlink's], one per
	// network of the device; nil without nodes.
	Hops [][2][]netip.Addr
	// PathPeer is the peer's (or the first node's) address on each path
	// whose match has a dst, by path name: the network's first host
	// address, as a lab's server on the path has. DeviceRoutes are the
	// networks routed into the TUN device: the tun section's routes,
	// then those paths' dst outside the device's networks.
	PathPeer     map[string]netip.Addr
	DeviceRoutes []netip.Prefix
	// Flows are the scenario's flows' ends, in its order.
	Flows []Flow
}

// Flow is where a flow runs.
type Flow struct {
	// Client and Server are its ends, indexes into Net.Machines: a
	// netstack flow's hosts; a kernel flow's kernel end and the peer or
	// its node.
	Client, Server int
	// ClientAddr and ServerAddr are the addresses of its ends: the
	// client's sends from its one (a kernel's, its first), and the server
	// listens on its one.
	ClientAddr, ServerAddr netip.Addr
	// Port is the server end's port.
	Port uint16
}

// Options changes what Compile makes.
type Options struct {
	// Hosts, when not nil, are the netstack hosts to make instead of
	// those the flows need (a bench's: its own two). Compile fills in
	// each one's Kind, Index, Addrs, Node, and Name when "".
	Hosts []Machine
}

// maxHosts bounds the netstack hosts of a side: their addresses are
// 10.0.0.1 to .100 and .101 to .200.
const maxHosts = 100

// PeerSeedIndex is the host number the peer's seed is derived from,
// after every netstack host's: its seed is the scenario's plus
// 2*PeerSeedIndex+1.
const PeerSeedIndex = maxHosts

// Compile compiles s, valid, into its network.
func Compile(s *scenario.Scenario, o Options) (*Net, error) {
	n := &Net{}
	if err := checkPathNets(s); err != nil {
		return nil, err
	}
	hosts := o.Hosts
	if hosts == nil {
		hosts = netstackHosts(s)
	}
	for _, h := range hosts {
		if err := n.addHost(s, h); err != nil {
			return nil, err
		}
	}
	if len(s.Nodes) > 0 && s.Nodes[0].Stack == scenario.StackNetstack {
		n.addNetstackNodes(s)
	}
	if s.TUN != nil {
		if err := n.addTUN(s); err != nil {
			return nil, err
		}
	}
	n.Paths = append(append(n.Paths, s.Paths...), nodePaths(s)...)
	if err := n.flows(s); err != nil {
		return nil, err
	}
	return n, nil
}

// HostAddrs are netstack host i's addresses on its side: 10.0.0.N/24 and
// fd00::N/64, N = 1+i on the client side, 101+i on the server side.
func HostAddrs(i int, server bool) []netip.Prefix {
	n := byte(1 + i)
	if server {
		n += 100
	}
	v6 := netip.AddrFrom16([16]byte{0xfd, 15: n})
	return []netip.Prefix{
		netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, n}), 24),
		netip.PrefixFrom(v6, 64),
	}
}

// hostAddrsMTU are HostAddrs for hosts of MTU mtu: below IPv6's minimum,
// the IPv4 address alone, as Linux leaves such an interface without
// IPv6 (the scenario then has no IPv6 path).
func hostAddrsMTU(i int, server bool, mtu int) []netip.Prefix {
	a := HostAddrs(i, server)
	if mtu < netif.MinMTUIPv6 {
		a = a[:1]
	}
	return a
}

// Kinds returns the indexes of the machines of kind k, in order.
func (n *Net) Kinds(k Kind) []int {
	var out []int
	for i, m := range n.Machines {
		if m.Kind == k {
			out = append(out, i)
		}
	}
	return out
}
