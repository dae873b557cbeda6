package scenario

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/netif"
)

// Node is a machine at the far end of the TUN device's path whose own
// kernel ends its connections: a network namespace of netjam's with a TUN
// device netjam serves, and optionally a command run in it. The first
// node takes the peer's place and its addresses (TUN.Peer and the paths'
// own, see the emulator); each further one has addresses of its own in
// the device's networks. netjam forwards IP packets between the TUN
// device's kernel (the node named ClientNode) and the nodes, and between
// nodes, terminating nothing: any protocol, and either end's own
// congestion control. Between two nodes a packet crosses the first's
// link back to the client's side, where a hub turns it round, and the
// second's link out (a star: the delay between two nodes is the sum of
// their links'), unless a link joins the two directly (Link.Between).
type Node struct {
	// Name is the node's host name in every node's hosts file: letters,
	// digits and '-', as a DNS label (not ClientNode).
	Name string
	// Stack is StackKernel (a kernel of its own behind a TUN device of
	// netjam's, in a scenario with a tun section) or StackNetstack (a
	// host of netjam's, gVisor's, in a scenario without one: rootless,
	// and on the virtual clock too; it runs no command, and is the end
	// of flows). A scenario's nodes are all of one stack.
	Stack string
	// Run is a command line run with /bin/sh -c in the node once the
	// path is up, and ended when the run ends; "" runs nothing.
	Run string
	// Env is added to Run's environment, KEY=VALUE, sorted by key.
	Env []string
	// Dir is Run's working directory, an absolute path; "" keeps
	// netjam's.
	Dir string
	// Addrs are the node's addresses, one per address of the TUN device,
	// in its order: the first node's are TUN.Peer; each further node
	// takes the next free host address of each of the device's networks
	// (after the stations', see TUN.StationAddrs).
	Addrs []netip.Addr
	// Link is the link of the scenario's links list that joins the node
	// to the client's side: what is for its addresses crosses it (its
	// uplink) and what it sends crosses it back (its downlink); "" for
	// the default path.
	Link string
}

// ClientNode is the name of the TUN device's side in the nodes' hosts
// files: the namespace netjam shell runs its command in.
const ClientNode = "client"

// maxScenarioNodes bounds the nodes of a scenario: each has a namespace,
// a TUN device, a read loop and an inbox.
const maxScenarioNodes = 64

// maxNodeName is the longest node name: a DNS label's.
const maxNodeName = 63

// validNodeName is the form of a node's name: a DNS label (RFC 1123).
var validNodeName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)

// validEnvKey is the form of an environment variable's name in a node's env.
var validEnvKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var (
	nodeStacks = []string{StackKernel, StackNetstack}
)

// maxNetstackNodes bounds the netstack nodes: they take the lab's
// addresses 10.0.0.201 to .250.
const maxNetstackNodes = 50

// nodesStack returns the stack of the nodes of the list n: all of one,
// kernel (the default) or netstack; false, said, when they mix.
func (d *decoder) nodesStack(n *yaml.Node) (string, bool) {
	stack, at := "", (*yaml.Node)(nil)
	for _, item := range n.Content {
		s := StackKernel
		if v := lookup(item, "stack"); v != nil && v.Kind == yaml.ScalarNode && v.Value == StackNetstack {
			s = StackNetstack
		}
		switch {
		case stack == "":
			stack, at = s, item
		case s != stack:
			d.errorf(item, "nodes", "a %s node beside a %s node (line %d): a scenario's nodes are all kernel (behind the TUN device) or all netstack (netjam's own hosts)", s, stack, at.Line)
			return "", false
		}
	}
	return cmp.Or(stack, StackKernel), true
}

// nodes decodes the nodes list, n, of a scenario whose TUN section is t
// (tn its node; nil without one) and whose hosts have the MTU mtu.
func (d *decoder) nodes(n *yaml.Node, t *TUN, tn *yaml.Node, mtu int) []Node {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "nodes", "expected a list of nodes, got %s", describe(n))
		return nil
	}
	stack, ok := d.nodesStack(n)
	switch {
	case !ok:
		return nil
	case stack == StackKernel && t == nil:
		d.errorf(n, "nodes", "nodes sit at the far end of the TUN device's path: add a tun section (tun: {} for every default), or make them netjam's own hosts (stack: netstack)")
		return nil
	case stack == StackNetstack && t != nil:
		d.errorf(tn, "tun", "netstack nodes are netjam's own hosts, beside no TUN device: remove the tun section, or make the nodes kernels (stack: kernel)")
		return nil
	case stack == StackNetstack && len(n.Content) > maxNetstackNodes:
		d.errorf(n.Content[maxNetstackNodes], "nodes", "a scenario has at most %d netstack nodes", maxNetstackNodes)
		return nil
	case len(n.Content) > maxScenarioNodes:
		d.errorf(n.Content[maxScenarioNodes], "nodes", "a scenario has at most %d nodes", maxScenarioNodes)
	}
	if t != nil {
		d.nodesReplacePeer(tn)
	}
	var out []Node
	names := map[string]int{}
	for i, item := range n.Content {
		path := fmt.Sprintf("nodes[%d]", i)
		f, ok := d.fields(item, path, "a mapping of node keys", nodeKeys)
		if !ok {
			continue
		}
		nd := Node{Stack: stack}
		path = d.nodeName(item, f["name"], path, names, &nd)
		if v := f["stack"]; v != nil {
			d.oneOf(v, join(path, "stack"), "stack", nodeStacks)
		}
		if stack == StackNetstack {
			for _, k := range []string{"run", "env", "dir"} {
				if v := f[k]; v != nil {
					d.errorf(v, join(path, k), "a netstack node runs no command: it is a host of netjam's, the end of flows (flows[].node, flows[].from); a command needs a kernel node")
					delete(f, k)
				}
			}
		}
		if v := f["run"]; v != nil {
			if r, ok := d.text(v, join(path, "run")); ok {
				if strings.TrimSpace(r) == "" {
					d.errorf(v, join(path, "run"), "an empty command (leave run out for none)")
				}
				nd.Run = r
			}
		}
		if v := f["dir"]; v != nil {
			if dir, ok := d.text(v, join(path, "dir")); ok {
				if !filepath.IsAbs(dir) {
					d.errorf(v, join(path, "dir"), "%s is not an absolute path", quote(dir))
				}
				nd.Dir = filepath.Clean(dir)
			}
		}
		if v := f["env"]; v != nil {
			nd.Env = d.nodeEnv(v, join(path, "env"))
		}
		if v := f["link"]; v != nil {
			nd.Link, _ = d.text(v, join(path, "link"))
		}
		out = append(out, nd)
	}
	if stack == StackNetstack {
		netstackNodeAddrs(out, mtu)
		return out
	}
	d.nodeAddrs(n, t, out)
	return out
}

// netstackNodeAddrs gives each netstack node its addresses, on the lab's
// networks after its hosts': 10.0.0.201 and fd00::c9 for the first, and
// so on (IPv4 alone below IPv6's minimum MTU, as the hosts have).
func netstackNodeAddrs(nodes []Node, mtu int) {
	for i := range nodes {
		n := byte(201 + i)
		nodes[i].Addrs = []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, n})}
		if mtu >= netif.MinMTUIPv6 {
			nodes[i].Addrs = append(nodes[i].Addrs, netip.AddrFrom16([16]byte{0xfd, 15: n}))
		}
	}
}

// nodeAddrs gives each node its addresses: the first the peer's, each
// further one the next free host address of each of the device's
// networks, after the kernel's, the peers' and the stations'.
func (d *decoder) nodeAddrs(n *yaml.Node, t *TUN, nodes []Node) {
	used := map[netip.Addr]bool{}
	for _, p := range t.Peer {
		used[p] = true
	}
	for _, sa := range t.StationAddrs {
		for _, a := range sa {
			used[a] = true
		}
	}
	next := make([]netip.Addr, len(t.Device.Addrs))
	for i, p := range t.Device.Addrs {
		used[p.Addr()] = true
		next[i] = p.Addr()
	}
	for k := range nodes {
		if k == 0 {
			nodes[k].Addrs = slices.Clone(t.Peer)
			continue
		}
		for i, p := range t.Device.Addrs {
			a := next[i].Next()
			for a.IsValid() && p.Contains(a) && (used[a] || !hostOf(p, a)) {
				a = a.Next()
			}
			if !a.IsValid() || !p.Contains(a) {
				d.errorf(n, "nodes", "no address is left in %v for node %s: give tun.address a larger network", p.Masked(), nodes[k].Name)
				return
			}
			used[a], next[i] = true, a
			nodes[k].Addrs = append(nodes[k].Addrs, a)
		}
	}
}

// nodeLinks checks the link each node of n names (nodes[].link): one of
// the scenario's links, not one between two nodes.
func (d *decoder) nodeLinks(n *yaml.Node, links []Link) {
	if n == nil || n.Kind != yaml.SequenceNode {
		return
	}
	var names []string
	for _, l := range links {
		if l.Between == nil {
			names = append(names, l.Name)
		}
	}
	for i, item := range n.Content {
		if item.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(item.Content); j += 2 {
			if item.Content[j].Value != "link" {
				continue
			}
			v, at := item.Content[j+1], fmt.Sprintf("nodes[%d].link", i)
			if k := slices.IndexFunc(links, func(l Link) bool { return l.Name == v.Value }); k >= 0 && links[k].Between != nil {
				d.errorf(v, at, "link %s joins nodes %s and %s (between); a node's link joins it to the client's side", v.Value, links[k].Between[0], links[k].Between[1])
				continue
			}
			d.oneOf(v, at, "link", names)
		}
	}
}

// between decodes a link's between, n at path: two nodes of nodes, each
// pair joined by one link at most (before are the links so far).
func (d *decoder) between(n *yaml.Node, path string, nodes []Node, before []Link) []string {
	if len(nodes) == 0 {
		d.errorf(n, path, "between joins two nodes, and the scenario has no nodes")
		return nil
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
		d.errorf(n, path, "expected two node names, like [a, b], got %s", describe(n))
		return nil
	}
	var names []string
	for _, nd := range nodes {
		names = append(names, nd.Name)
	}
	var pair []string
	for _, x := range n.Content {
		if x.Kind == yaml.ScalarNode && strings.EqualFold(x.Value, ClientNode) {
			d.errorf(x, path, "the client's side is joined to a node by the node's link (nodes[].link), not by between")
			return nil
		}
		name, ok := d.oneOf(x, path, "node", names)
		if !ok {
			return nil
		}
		pair = append(pair, name)
	}
	if pair[0] == pair[1] {
		d.errorf(n, path, "a link between %s and itself: name two nodes", pair[0])
		return nil
	}
	for _, l := range before {
		if l.Between != nil && (slices.Equal(l.Between, pair) || l.Between[0] == pair[1] && l.Between[1] == pair[0]) {
			d.errorf(n, path, "link %s joins %s and %s already: one link between two nodes (its uplink and downlink may differ)", l.Name, l.Between[0], l.Between[1])
			return nil
		}
	}
	return pair
}

// nodeName decodes a node's name, v, unique among names (each with its
// line), and returns the node's path: nodes.NAME once it has a valid one.
func (d *decoder) nodeName(item, v *yaml.Node, path string, names map[string]int, nd *Node) string {
	if v == nil {
		d.errorf(item, path, "a node needs a name")
		return path
	}
	name, ok := d.text(v, join(path, "name"))
	if !ok {
		return path
	}
	switch line, dup := names[strings.ToLower(name)]; {
	case len(name) > maxNodeName:
		d.errorf(v, join(path, "name"), "%s is not a valid node name (at most %d characters: it is a host name)", quote(name), maxNodeName)
	case !validNodeName.MatchString(name):
		d.errorf(v, join(path, "name"), "%s is not a valid node name (use letters, digits and '-', not first or last: it is a host name)", quote(name))
	case strings.EqualFold(name, ClientNode):
		d.errorf(v, join(path, "name"), "%s names the TUN device's side, where netjam shell's command runs; choose another name", quote(name))
	case dup:
		d.errorf(v, join(path, "name"), "%s names two nodes (first at line %d)", quote(name), line)
	default:
		names[strings.ToLower(name)] = v.Line
		nd.Name, path = name, "nodes."+name
	}
	return path
}

// nodeEnv decodes a node's env, a mapping of variable names to text.
func (d *decoder) nodeEnv(n *yaml.Node, path string) []string {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping of variables to values, like {GODEBUG: http2debug=1}, got %s", describe(n))
		return nil
	}
	var env []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !validEnvKey.MatchString(k.Value) {
			d.errorf(k, path, "%s is not a variable name (letters, digits and '_', not a digit first)", quote(k.Value))
			continue
		}
		if val, ok := d.text(v, join(path, k.Value)); ok {
			if strings.ContainsRune(val, 0) {
				d.errorf(v, join(path, k.Value), "a value holds a NUL byte")
				continue
			}
			env = append(env, k.Value+"="+val)
		}
	}
	slices.Sort(env)
	return env
}

// nodesReplacePeer refuses the tun keys of the peer's relay beside nodes
// (tn is the tun mapping): the node takes the peer's place, and has no
// relay.
func (d *decoder) nodesReplacePeer(tn *yaml.Node) {
	if tn == nil || tn.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(tn.Content); i += 2 {
		switch k := tn.Content[i]; k.Value {
		case "forward", "transparent", "services", "udp_idle", "tcp_idle":
			d.errorf(k, "tun."+k.Value, "the node takes the peer's place, and the peer's relay goes with it: remove tun.%s (a node reaches no real server; run it in the node)", k.Value)
		}
	}
}

// flowNodes checks the node each flow of n names (flows[].node, and
// flows[].from): one of the scenario's nodes, of the flow's stack,
// without a path.
func (d *decoder) flowNodes(n *yaml.Node, fls []Flow, nodes []Node) {
	if n == nil || n.Kind != yaml.SequenceNode {
		return
	}
	var names []string
	for _, nd := range nodes {
		names = append(names, nd.Name)
	}
	for _, item := range n.Content {
		nn := lookup(item, "name")
		if nn == nil {
			continue
		}
		i := slices.IndexFunc(fls, func(f Flow) bool { return f.Name == nn.Value })
		if i < 0 {
			continue // the flow has other errors
		}
		if v := lookup(item, "node"); v != nil && !isNull(v) {
			fls[i].Node, _ = d.flowNode(item, v, "flows."+fls[i].Name+".node", fls[i], nodes, names)
		}
		if v := lookup(item, "from"); v != nil && !isNull(v) {
			d.flowFrom(item, v, "flows."+fls[i].Name+".from", &fls[i], nodes, names)
		}
	}
}

// flowNode checks the node v, at, that flow f names (node or from).
func (d *decoder) flowNode(item, v *yaml.Node, at string, f Flow, nodes []Node, names []string) (string, bool) {
	switch {
	case len(nodes) == 0:
		d.errorf(v, at, "the scenario has no nodes")
	case f.Stack != nodes[0].Stack && f.Stack == StackKernel:
		d.errorf(v, at, "the nodes are netjam's own hosts (netstack): a flow between them is stack: netstack")
	case f.Stack != nodes[0].Stack:
		d.errorf(v, at, "a netstack flow runs between netjam's own hosts; a flow to a kernel node is stack: kernel")
	case lookup(item, "path") != nil:
		d.errorf(v, at, "a flow to or from a node crosses that node's link; leave path out")
	case f.Stack == StackNetstack && f.Type == "tcp" && !f.SACK:
		d.errorf(v, at, "a netstack node's TCP has SACK on (gVisor's is per host): leave sack out")
	default:
		return d.oneOf(v, at, "node", names)
	}
	return "", false
}

// flowFrom checks the node v, at, a flow f starts from (flows[].from): a
// netstack node, not the one it goes to, and sets f.From.
func (d *decoder) flowFrom(item, v *yaml.Node, at string, f *Flow, nodes []Node, names []string) {
	switch {
	case len(nodes) > 0 && nodes[0].Stack == StackKernel:
		d.errorf(v, at, "a flow from a kernel node is its command's to make (run); from is for netstack nodes")
	case f.Station != "":
		d.errorf(v, at, "a flow from a node starts at no Wi-Fi station: leave station out")
	case lookup(item, "node") == nil:
		d.errorf(v, at, "a flow from a node goes to another: name it (node)")
	default:
		name, ok := d.flowNode(item, v, at, *f, nodes, names)
		if ok && name == f.Node {
			d.errorf(v, at, "a flow from %s to itself", name)
			return
		}
		f.From = name
	}
}

// Node returns the node named name, or nil.
func (s *Scenario) Node(name string) *Node {
	for i := range s.Nodes {
		if strings.EqualFold(s.Nodes[i].Name, name) {
			return &s.Nodes[i]
		}
	}
	return nil
}

// NodesSet turns netjam shell's --node NAME=CMD flags into a --set of the
// scenario's nodes: those of the file (have), a flag's CMD replacing the
// run of the node it names, then the flags' new nodes, in order. The
// scenario checks the result as it checks a file's nodes.
func NodesSet(flags []string, have []Node) (string, error) {
	type node struct {
		Name string            `json:"name"`
		Run  string            `json:"run,omitempty"`
		Env  map[string]string `json:"env,omitempty"`
		Dir  string            `json:"dir,omitempty"`
	}
	var nodes []node
	for _, n := range have {
		nd := node{Name: n.Name, Run: n.Run, Dir: n.Dir}
		for _, kv := range n.Env {
			k, v, _ := strings.Cut(kv, "=")
			if nd.Env == nil {
				nd.Env = map[string]string{}
			}
			nd.Env[k] = v
		}
		nodes = append(nodes, nd)
	}
	for _, f := range flags {
		name, run, ok := strings.Cut(f, "=")
		if !ok || name == "" || strings.TrimSpace(run) == "" {
			return "", fmt.Errorf("--node %q: expected NAME=COMMAND, like --node server='iperf3 -s'", f)
		}
		i := slices.IndexFunc(nodes, func(n node) bool { return strings.EqualFold(n.Name, name) })
		if i < 0 {
			nodes = append(nodes, node{Name: name})
			i = len(nodes) - 1
		}
		nodes[i].Run = run
	}
	b, err := json.Marshal(nodes)
	if err != nil {
		return "", err
	}
	return "nodes=" + string(b), nil
}
