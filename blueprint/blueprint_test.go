package blueprint

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/netjam/netjam/scenario"
)

func compile(t *testing.T, src string, o Options) *Net {
	t.Helper()
	plan, err := scenario.Parse("x.yaml", []byte(src), scenario.Options{CongestionControls: func() ([]string, error) { return []string{"reno", "cubic", "bbr"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Compile(plan.Runs[0], o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// machines writes n's machines one a line: name kind side index addrs.
func machines(n *Net) string {
	var b strings.Builder
	for _, m := range n.Machines {
		side := "client"
		if m.Server {
			side = "server"
		}
		fmt.Fprintf(&b, "%s %s %s %d %v", m.Name, m.Kind, side, m.Index, m.Addrs)
		if m.Path != "" {
			fmt.Fprintf(&b, " path=%s", m.Path)
		}
		if !m.SACK {
			b.WriteString(" nosack")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func flows(n *Net) string {
	var b strings.Builder
	for _, f := range n.Flows {
		fmt.Fprintf(&b, "%s %s -> %s %s:%d\n", n.Machines[f.Client].Name, f.ClientAddr, n.Machines[f.Server].Name, f.ServerAddr, f.Port)
	}
	return b.String()
}

func check(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n got\n%s\nwant\n%s", what, got, want)
	}
}

// TestLabHosts: a client and a server host per SACK setting, in the
// flows' order; a path's servers take its dst's first host addresses.
func TestLabHosts(t *testing.T) {
	n := compile(t, `
links: [{name: access}, {name: eu}]
paths:
  - {name: near, via: [access]}
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
flows:
  - {name: a, type: tcp, duration: 1s}
  - {name: b, type: tcp, duration: 1s, sack: false, direction: down}
  - {name: c, type: udp, interval: 10ms, duration: 1s, path: to-eu}
  - {name: d, type: tcp, duration: 1s, path: to-eu, sack: false}
`, Options{})
	check(t, "machines", machines(n), `client0 netstack client 0 [10.0.0.1/24 fd00::1/64]
server0 netstack server 0 [10.0.0.101/24 fd00::65/64] path=near
client1 netstack client 1 [10.0.0.2/24 fd00::2/64] nosack
server1 netstack server 1 [10.0.0.102/24 fd00::66/64] path=near nosack
server2 netstack server 2 [10.20.0.1/16] path=to-eu
server3 netstack server 3 [10.20.0.2/16] path=to-eu nosack
`)
	check(t, "flows", flows(n), `client0 10.0.0.1 -> server0 10.0.0.101:5001
client1 10.0.0.2 -> server1 10.0.0.102:5002
client0 10.0.0.1 -> server2 10.20.0.1:5003
client1 10.0.0.2 -> server3 10.20.0.2:5004
`)
	// Below IPv6's minimum MTU, IPv4 alone.
	n = compile(t, "mtu: 1000\nflows: [{name: a, type: tcp, duration: 1s}]\n", Options{})
	check(t, "machines at mtu 1000", machines(n), "client0 netstack client 0 [10.0.0.1/24]\nserver0 netstack server 0 [10.0.0.101/24] path=default\n")
}

// TestGivenHosts: a bench's own hosts, named, with the first addresses.
func TestGivenHosts(t *testing.T) {
	n := compile(t, "link: {delay: 1ms}\n", Options{Hosts: []Machine{{Name: "client", SACK: true}, {Name: "server", Server: true, SACK: true, Transparent: true, CatchAll: true}}})
	check(t, "machines", machines(n), "client netstack client 0 [10.0.0.1/24 fd00::1/64]\nserver netstack server 0 [10.0.0.101/24 fd00::65/64]\n")
	if !n.Machines[1].CatchAll || !n.Machines[1].Transparent {
		t.Error("the server lost CatchAll or Transparent")
	}
}

// TestTUNPeer: the kernel's end and the peer, with the peer's address on
// each path with a dst (the network's first host), that network routed
// into the device when outside its networks; a kernel flow goes to the
// peer's address on its path, on a port the forwards leave free.
func TestTUNPeer(t *testing.T) {
	n := compile(t, `
links: [{name: access}, {name: eu}]
paths:
  - {name: near, via: [access]}
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: routed, via: [access], match: {dst: 10.30.1.0/24}}
tun: {address: [10.99.0.1/24, fd99::1/64], routes: [10.30.0.0/16], forward: [{proto: tcp, listen: 5001, to: 127.0.0.1:80}]}
flows:
  - {name: a, type: tcp, duration: 1s, stack: kernel}
  - {name: b, type: tcp, duration: 1s, stack: kernel, path: to-eu}
`, Options{})
	check(t, "machines", machines(n), `kernel kernel client -1 [10.99.0.1/24 fd99::1/64]
peer peer server -1 [10.99.0.2/24 fd99::2/64 10.20.0.1/16 10.30.1.1/24]
`)
	check(t, "flows", flows(n), "kernel 10.99.0.1 -> peer 10.99.0.2:5002\nkernel 10.99.0.1 -> peer 10.20.0.1:5003\n")
	if want := []netip.Prefix{netip.MustParsePrefix("10.30.0.0/16"), netip.MustParsePrefix("10.20.0.0/16")}; !slices.Equal(n.DeviceRoutes, want) {
		t.Errorf("routes %v, want %v", n.DeviceRoutes, want)
	}
	if n.Hops != nil {
		t.Errorf("routers without nodes: %v", n.Hops)
	}
}

// TestTUNStations: the kernel behind two stations is two ends, the
// second with the next free addresses; a netstack station has a host.
func TestTUNStations(t *testing.T) {
	n := compile(t, `
wifi: {stations: [{name: laptop}, {name: phone}, {name: tv}]}
tun: {station: [laptop, tv]}
flows:
  - {name: a, type: tcp, duration: 1s, station: phone}
  - {name: k, type: udp, interval: 10ms, duration: 1s, stack: kernel, station: tv}
`, Options{})
	check(t, "machines", machines(n), `phone netstack client 0 [10.0.0.1/24 fd00::1/64]
server0 netstack server 0 [10.0.0.101/24 fd00::65/64] path=default
kernel laptop kernel client -1 [10.99.0.1/24]
kernel tv kernel client -1 [10.99.0.3/24]
peer peer server -1 [10.99.0.2/24]
`)
	check(t, "flows", flows(n), "phone 10.0.0.1 -> server0 10.0.0.101:5001\nkernel tv 10.99.0.3 -> peer 10.99.0.2:5002\n")
}

// TestNodesAndRouters: the first node takes the peer's addresses, the
// others the next free ones; the routers in front of each link's
// directions take addresses from the top of the device's networks; a
// node's link is a path matching its address; a kernel flow goes to its
// node.
func TestNodesAndRouters(t *testing.T) {
	n := compile(t, `
links: [{name: la}, {name: lb}, {name: ab, between: [a, b]}]
tun: {address: [10.99.0.1/24, fd99::1/64]}
nodes: [{name: a, link: la}, {name: b, link: lb}]
flows:
  - {name: f, type: tcp, duration: 1s, stack: kernel, node: b}
  - {name: g, type: tcp, duration: 1s, stack: kernel}
`, Options{})
	check(t, "machines", machines(n), `kernel kernel client -1 [10.99.0.1/24 fd99::1/64]
a node server -1 [10.99.0.2/24 fd99::2/64]
b node server -1 [10.99.0.3/24 fd99::3/64]
`)
	check(t, "flows", flows(n), "kernel 10.99.0.1 -> b 10.99.0.3:5001\nkernel 10.99.0.1 -> a 10.99.0.2:5002\n")
	var hops []string
	for _, h := range n.Hops {
		hops = append(hops, fmt.Sprint(h))
	}
	if want := []string{"[[10.99.0.254 fd99::ffff:ffff:ffff:ffff] [10.99.0.253 fd99::ffff:ffff:ffff:fffe]]",
		"[[10.99.0.252 fd99::ffff:ffff:ffff:fffd] [10.99.0.251 fd99::ffff:ffff:ffff:fffc]]",
		"[[10.99.0.250 fd99::ffff:ffff:ffff:fffb] [10.99.0.249 fd99::ffff:ffff:ffff:fffa]]"}; !slices.Equal(hops, want) {
		t.Errorf("routers' addresses:\n got %q\nwant %q", hops, want)
	}
	var paths []string
	for _, p := range n.Paths {
		paths = append(paths, fmt.Sprintf("%s %v %v", p.Name, p.Via, PathMatch(p).Prefix))
	}
	if want := []string{"default [la lb] invalid Prefix", "node a [la] 10.99.0.2/32", "node a [la] fd99::2/128", "node b [lb] 10.99.0.3/32", "node b [lb] fd99::3/128"}; !slices.Equal(paths, want) {
		t.Errorf("paths:\n got %q\nwant %q", paths, want)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"links: [{name: a}]\npaths: [{name: p, via: [a], match: {dst: 10.0.0.0/16}}]\nflows: [{name: f, type: tcp, duration: 1s, path: p}]\n",
			"path p: its dst 10.0.0.0/16 overlaps 10.0.0.0/24, the lab's own (the client side's, or the TUN device's); give it another network"},
		{"links: [{name: a}]\npaths: [{name: p, via: [a], match: {dst: 10.20.0.0/31}}]\nflows: [{name: f, type: tcp, duration: 1s, path: p}, {name: g, type: tcp, duration: 1s, path: p, sack: false}, {name: h, type: tcp, duration: 1s, path: p, sack: false}]\n",
			""},
		{"links: [{name: a}]\npaths: [{name: p, via: [a], match: {dst: 10.20.0.0/31}}]\ntun: {}\nflows: [{name: f, type: tcp, duration: 1s, path: p}, {name: g, type: tcp, duration: 1s, path: p, sack: false}]\n",
			"path p: its dst 10.20.0.0/31 has no room for 3 hosts (one per sack setting of its flows, and the peer in TUN mode)"},
		{"links: [{name: a}, {name: b}]\npaths: [{name: d, via: [a]}, {name: p, via: [b], match: {dst: 10.0.0.101/32}}]\nflows: [{name: f, type: tcp, duration: 1s}]\n",
			"path p: its dst 10.0.0.101/32 overlaps 10.0.0.0/24, the lab's own (the client side's, or the TUN device's); give it another network"},
		{"links: [{name: a}, {name: b}]\npaths: [{name: d, via: [a]}, {name: p, via: [b], match: {proto: udp}}]\nflows: [{name: f, type: udp, interval: 10ms, duration: 1s}]\n",
			"flow f: its packets (udp to 10.0.0.101, port 5001) would take path p, not its path d: give the paths matches that tell them apart"},
		{"tun: {address: 10.99.0.1/29}\nlinks: [{name: a}, {name: b}]\nnodes: [{name: x}, {name: y}]\n",
			"no address is left in 10.99.0.0/29 for the routers in front of the links: give tun.address a larger network"},
	}
	for _, tt := range tests {
		plan, err := scenario.Parse("x.yaml", []byte(tt.src), scenario.Options{})
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.src, err)
			continue
		}
		_, err = Compile(plan.Runs[0], Options{})
		if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
			t.Errorf("Compile(%q):\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

// TestNetstackNodes: netstack nodes are server-side hosts after the
// lab's (their numbers, so their seeds, follow), at 10.0.0.201 and on;
// a flow to a node needs no server host, a flow from one no client host.
func TestNetstackNodes(t *testing.T) {
	n := compile(t, `
links: [{name: la}, {name: lb}]
nodes: [{name: a, stack: netstack, link: la}, {name: b, stack: netstack, link: lb}]
flows:
  - {name: f, type: tcp, duration: 1s}
  - {name: g, type: tcp, node: a, duration: 1s}
  - {name: h, type: udp, from: a, node: b, interval: 10ms, duration: 1s}
`, Options{})
	check(t, "machines", machines(n), `client0 netstack client 0 [10.0.0.1/24 fd00::1/64]
server0 netstack server 0 [10.0.0.101/24 fd00::65/64] path=default
a netstack server 1 [10.0.0.201/24 fd00::c9/64]
b netstack server 2 [10.0.0.202/24 fd00::ca/64]
`)
	check(t, "flows", flows(n), `client0 10.0.0.1 -> server0 10.0.0.101:5001
client0 10.0.0.1 -> a 10.0.0.201:5002
a 10.0.0.201 -> b 10.0.0.202:5003
`)
	if n.Machines[2].Node != 0 || n.Machines[3].Node != 1 || n.Hops != nil {
		t.Errorf("nodes %d, %d; routers %v", n.Machines[2].Node, n.Machines[3].Node, n.Hops)
	}
}
