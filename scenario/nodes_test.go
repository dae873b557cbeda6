package scenario

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNodes(t *testing.T) {
	s := mustParse(t, `
tun: {}
nodes:
  - name: server
    run: iperf3 -s -1
    env: {B: "2", A: x=y}
    dir: /srv/../tmp
`)
	want := []Node{{Name: "server", Stack: StackKernel, Run: "iperf3 -s -1", Env: []string{"A=x=y", "B=2"}, Dir: "/tmp", Addrs: addrs("10.99.0.2")}}
	if !reflect.DeepEqual(s.Nodes, want) {
		t.Errorf("nodes:\n got %+v\nwant %+v", s.Nodes, want)
	}
	if n := s.Node("SERVER"); n == nil || n.Name != "server" {
		t.Errorf("Node(SERVER) = %v, want server's", n)
	}
	if s := mustParse(t, "tun: {}\nnodes: [{name: s1, stack: kernel}]\n"); len(s.Nodes) != 1 || s.Nodes[0].Run != "" {
		t.Errorf("a node without run: %+v", s.Nodes)
	}
	// Further nodes take the next free addresses, after the stations'.
	s = mustParse(t, `
wifi: {stations: [{name: a}, {name: b}]}
tun: {address: [10.99.0.1/24, fd99::1/64], station: [a, b]}
links: [{name: l1}, {name: l2}]
nodes: [{name: n1}, {name: n2, link: l2}, {name: n3, link: l1}]
`)
	for i, want := range [][]netip.Addr{addrs("10.99.0.2", "fd99::2"), addrs("10.99.0.4", "fd99::4"), addrs("10.99.0.5", "fd99::5")} {
		if got := s.Nodes[i].Addrs; !slices.Equal(got, want) {
			t.Errorf("node %d: addresses %v, want %v", i, got, want)
		}
	}
	if s.Nodes[0].Link != "" || s.Nodes[1].Link != "l2" || s.Nodes[2].Link != "l1" {
		t.Errorf("links %q %q %q, want none, l2, l1", s.Nodes[0].Link, s.Nodes[1].Link, s.Nodes[2].Link)
	}
	// A kernel flow down is sent by the node's kernel, with any of the
	// kernel's congestion controls (the peer's netstack has two).
	s = mustParse(t, "tun: {}\nnodes: [{name: s1}]\nflows: [{name: k, type: tcp, stack: kernel, direction: down, cc: bbr, size: 1MB}]\n")
	if s.Flows[0].CC != "bbr" {
		t.Errorf("a kernel flow down to a node: cc %q, want bbr", s.Flows[0].CC)
	}
}

func TestNodeErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"nodes: [{name: a}]\n", "x.yaml:1: nodes: nodes sit at the far end of the TUN device's path: add a tun section (tun: {} for every default), or make them netjam's own hosts (stack: netstack)"},
		{"tun: {}\nnodes: {name: a}\n", "x.yaml:2: nodes: expected a list of nodes, got a mapping"},
		{"tun: {}\nnodes: [a]\n", `x.yaml:2: nodes[0]: expected a mapping of node keys, got the string "a"`},
		{"tun: {}\nnodes: [{run: x}]\n", "x.yaml:2: nodes[0]: a node needs a name"},
		{"tun: {}\nnodes: [{name: a_b}]\n", `x.yaml:2: nodes[0].name: "a_b" is not a valid node name (use letters, digits and '-', not first or last: it is a host name)`},
		{"tun: {}\nnodes: [{name: -a}]\n", `x.yaml:2: nodes[0].name: "-a" is not a valid node name (use letters, digits and '-', not first or last: it is a host name)`},
		{"tun: {}\nnodes: [{name: Client}]\n", `x.yaml:2: nodes[0].name: "Client" names the TUN device's side, where netjam shell's command runs; choose another name`},
		{"tun: {}\nnodes: [{name: a}, {name: A}]\n", `x.yaml:2: nodes[1].name: "A" names two nodes (first at line 2)`},
		{"tun: {address: 10.99.0.1/30}\nnodes: [{name: a}, {name: b}]\n", "x.yaml:2: nodes: no address is left in 10.99.0.0/30 for node b: give tun.address a larger network"},
		{"tun: {}\nlinks: [{name: l1}]\nnodes: [{name: a, link: l2}]\n", `x.yaml:3: nodes[0].link: "l2" is not a link; did you mean "l1"?`},
		{"tun: {}\nnodes: [{name: a, stack: netstack}]\n", "x.yaml:1: tun: netstack nodes are netjam's own hosts, beside no TUN device: remove the tun section, or make the nodes kernels (stack: kernel)"},
		{"tun: {}\nnodes: [{name: a, stack: gvisor}]\n", `x.yaml:2: nodes.a.stack: "gvisor" is not a stack (expected one of: kernel, netstack)`},
		{"tun: {}\nnodes: [{name: a, run: ' '}]\n", "x.yaml:2: nodes.a.run: an empty command (leave run out for none)"},
		{"tun: {}\nnodes: [{name: a, dir: srv}]\n", `x.yaml:2: nodes.a.dir: "srv" is not an absolute path`},
		{"tun: {}\nnodes: [{name: a, env: [A=1]}]\n", "x.yaml:2: nodes.a.env: expected a mapping of variables to values, like {GODEBUG: http2debug=1}, got a list"},
		{"tun: {}\nnodes: [{name: a, env: {1A: x}}]\n", `x.yaml:2: nodes.a.env: "1A" is not a variable name (letters, digits and '_', not a digit first)`},
		{"tun: {}\nnodes: [{name: a, dns: x}]\n", `x.yaml:2: nodes[0].dns: unknown key; did you mean "env"?`},
		{"tun: {services: false}\nnodes: [{name: a}]\n", "x.yaml:1: tun.services: the node takes the peer's place, and the peer's relay goes with it: remove tun.services (a node reaches no real server; run it in the node)"},
		{"tun: {forward: [{proto: tcp, listen: 80, to: 127.0.0.1:80}]}\nnodes: [{name: a}]\n", "x.yaml:1: tun.forward: the node takes the peer's place, and the peer's relay goes with it: remove tun.forward (a node reaches no real server; run it in the node)"},
	}
	for _, tt := range tests {
		_, err := parse(tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

// TestLinksBetweenNodes: a link between two nodes joins them directly;
// the default path leaves it out, and the timeline changes it by name.
func TestLinksBetweenNodes(t *testing.T) {
	s := mustParse(t, `
duration: 10s
tun: {}
links:
  - {name: access, delay: 5ms}
  - {name: ab, between: [a, b], delay: 2ms}
  - {name: bc, between: [c, b], uplink: {delay: 3ms}, downlink: {delay: 7ms}}
nodes: [{name: a, link: access}, {name: b}, {name: c}]
timeline:
  - {at: 1s, set: {links.ab.loss: 50%}}
`)
	var between [][]string
	for _, l := range s.Links {
		between = append(between, l.Between)
	}
	if want := [][]string{nil, {"a", "b"}, {"c", "b"}}; !reflect.DeepEqual(between, want) {
		t.Errorf("between %q, want %q", between, want)
	}
	if want := []Path{{Name: DefaultPath, Via: []string{"access"}}}; !reflect.DeepEqual(s.Paths, want) {
		t.Errorf("paths %+v, want %+v", s.Paths, want)
	}
	if s.Links[2].Uplink.Delay.Time != 3*time.Millisecond || s.Links[2].Downlink.Delay.Time != 7*time.Millisecond {
		t.Errorf("bc: %v up, %v down", s.Links[2].Uplink.Delay.Time, s.Links[2].Downlink.Delay.Time)
	}
	if p := s.Timeline[0]; p.Links[1].Uplink.Loss.P != 0.5 || p.Links[1].Between == nil {
		t.Errorf("the timeline's ab: %+v", p.Links[1])
	}
}

func TestLinksBetweenNodesErrors(t *testing.T) {
	const base = "tun: {}\nnodes: [{name: a}, {name: b}]\n"
	tests := []struct{ src, want string }{
		{"links: [{name: l}, {name: ab, between: [a, b]}]\n", "x.yaml:1: links.ab.between: between joins two nodes, and the scenario has no nodes"},
		{base + "links: [{name: l}, {name: ab, between: [a]}]\n", "x.yaml:3: links.ab.between: expected two node names, like [a, b], got a list"},
		{base + "links: [{name: l}, {name: ab, between: a}]\n", `x.yaml:3: links.ab.between: expected two node names, like [a, b], got the string "a"`},
		{base + "links: [{name: l}, {name: ab, between: [a, x]}]\n", `x.yaml:3: links.ab.between: "x" is not a node (expected one of: a, b)`},
		{base + "links: [{name: l}, {name: ab, between: [client, a]}]\n", "x.yaml:3: links.ab.between: the client's side is joined to a node by the node's link (nodes[].link), not by between"},
		{base + "links: [{name: l}, {name: ab, between: [a, a]}]\n", "x.yaml:3: links.ab.between: a link between a and itself: name two nodes"},
		{base + "links: [{name: l}, {name: ab, between: [a, b]}, {name: ba, between: [b, a]}]\n", "x.yaml:3: links.ba.between: link ab joins a and b already: one link between two nodes (its uplink and downlink may differ)"},
		{base + "links: [{name: ab, between: [a, b]}]\n", "x.yaml:3: links: every link joins two nodes (between): add a link for the client's side, which the default path crosses"},
		{base + "links: [{name: l}, {name: ab, between: [a, b]}]\npaths: [{name: p, via: [l, ab]}]\n", "x.yaml:4: paths.p.via: link ab joins nodes a and b (between): no path crosses it"},
		{"tun: {}\nnodes: [{name: a, link: ab}, {name: b}]\nlinks: [{name: l}, {name: ab, between: [a, b]}]\n", "x.yaml:2: nodes[0].link: link ab joins nodes a and b (between); a node's link joins it to the client's side"},
	}
	for _, tt := range tests {
		_, err := parse(tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

func TestTimelinePartition(t *testing.T) {
	s := mustParse(t, `
duration: 30s
tun: {}
nodes: [{name: a}, {name: b}, {name: c}]
timeline:
  - {at: 2s, partition: [[a], [b, c]]}
  - {at: 5s, heal: true}
  - {at: 10s, for: 3s, partition: {from: [a, client], to: [c]}}
`)
	var got []string
	for _, p := range s.Timeline {
		got = append(got, fmt.Sprintf("%v %v", p.At, p.Partition))
	}
	want := []string{"2s [a] | [b c]", "5s healed", "10s [a client] -> [c]", "13s healed"}
	if !slices.Equal(got, want) {
		t.Errorf("timeline %q, want %q", got, want)
	}
}

func TestTimelinePartitionErrors(t *testing.T) {
	const base = "tun: {}\nnodes: [{name: a}, {name: b}]\ntimeline:\n"
	tests := []struct{ src, want string }{
		{"timeline: [{at: 1s, partition: [[a], [b]]}]\n", "x.yaml:1: timeline[0].partition: a partition splits the scenario's nodes: add nodes"},
		{base + "  - {at: 1s, partition: [[a]]}\n", "x.yaml:4: timeline[0].partition: a partition needs at least two groups, like [[a], [b, c]]"},
		{base + "  - {at: 1s, partition: [[a], [x]]}\n", `x.yaml:4: timeline[0].partition[1]: "x" is not a node (expected one of: client, a, b)`},
		{base + "  - {at: 1s, partition: [[a], [a, b]]}\n", `x.yaml:4: timeline[0].partition[1]: "a" is in two groups (first at line 4)`},
		{base + "  - {at: 1s, partition: [a, b]}\n", "x.yaml:4: timeline[0].partition: expected groups, each a list of node names, like [[a], [b, c]]"},
		{base + "  - {at: 1s, partition: {from: [a]}}\n", "x.yaml:4: timeline[0].partition: missing key to (a one-way partition drops what from sends to)"},
		{base + "  - {at: 1s, partition: [[a], [b]], ramp: 1s}\n", "x.yaml:4: timeline[0].ramp: a partition entry has no ramp (give it an entry of its own)"},
		{base + "  - {at: 1s, heal: true, for: 1s}\n", "x.yaml:4: timeline[0].for: a heal entry has no for (give it an entry of its own)"},
		{base + "  - {at: 1s, heal: false}\n", "x.yaml:4: timeline[0].heal: heal: false changes nothing; leave the entry out"},
	}
	for _, tt := range tests {
		_, err := parse(tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

func TestCheckPartition(t *testing.T) {
	s := mustParse(t, "tun: {}\nnodes: [{name: a}, {name: b}]\n")
	if p, err := s.CheckPartition(&Partition{Groups: [][]string{{"a"}, {"b", "client"}}}); err != nil || p.String() != "[a] | [b client]" {
		t.Errorf("a partition: %v, %v", p, err)
	}
	if p, err := s.CheckPartition(&Partition{Groups: [][]string{{"a"}, {"b"}}, OneWay: true}); err != nil || p.String() != "[a] -> [b]" {
		t.Errorf("one way: %v, %v", p, err)
	}
	for _, c := range []struct {
		p    Partition
		want string
	}{
		{Partition{Groups: [][]string{{"a"}, {"x"}}}, `partition[1]: "x" is not a node (expected one of: client, a, b)`},
		{Partition{Groups: [][]string{{"a"}}}, "partition: a partition needs at least two groups, like [[a], [b, c]]"},
		{Partition{Groups: [][]string{{"a"}, {"b"}, {"client"}}, OneWay: true}, "partition: a one-way partition has two groups: from, then to"},
	} {
		if _, err := s.CheckPartition(&c.p); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %s", c.p, err, c.want)
		}
	}
	// As run: the changes made live are timeline entries.
	if err := s.AddTimelinePartition(1500*time.Millisecond, &Partition{Groups: [][]string{{"a"}, {"b"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTimelinePartition(3*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	y, err := s.YAML()
	if err != nil || !strings.Contains(string(y), "- {at: 1.5s, partition: [[a], [b]]}") || !strings.Contains(string(y), "- {at: 3s, heal: true}") {
		t.Errorf("as run: %v\n%s", err, y)
	}
}

// TestNodesSet: --node NAME=CMD replaces the run of the file's node it
// names (its other keys kept) and adds the others after the file's, in
// order; a flag without NAME or CMD is refused.
func TestNodesSet(t *testing.T) {
	have := []Node{{Name: "server", Run: "old", Env: []string{"A=1"}, Dir: "/srv"}}
	got, err := NodesSet([]string{"Server=iperf3 -s", "db=redis-server"}, have)
	if want := `nodes=[{"name":"server","run":"iperf3 -s","env":{"A":"1"},"dir":"/srv"},{"name":"db","run":"redis-server"}]`; err != nil || got != want {
		t.Errorf("got %s, %v; want %s", got, err, want)
	}
	for _, f := range []string{"server", "=cmd", "server= "} {
		if _, err := NodesSet([]string{f}, nil); err == nil || !strings.Contains(err.Error(), "expected NAME=COMMAND") {
			t.Errorf("--node %q: %v", f, err)
		}
	}
}
