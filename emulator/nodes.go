package emulator

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
)

// A node takes the peer's place at the far end of the path: a network
// namespace of netjam's with a TUN device holding the peer's addresses,
// whose kernel ends the client's connections. Both ends are kernels, and
// netjam forwards IP packets between them, terminating nothing:
//
//	kernel -> device -> read loop -> [cell ->] uplink -> node's inbox -> node's device -> node's kernel
//	kernel <- device <- inbox <- [cell <-] downlink <- read loop <- node's device <- node's kernel
//
// The node's device is read and written as the client's is (devEnd):
// large segments cross whole where the path allows, the node's read loop
// sheds at a full downlink. Its command runs in its namespace, with a
// hosts file that names every node, and ends with the run.
type nodeEnd struct {
	devEnd
	cfg   scenario.Node
	addrs []netip.Prefix // its device's addresses: the first node's the peer's
	end   *endHost       // its ends in the graph

	cmd     *exec.Cmd
	out     *prefixWriter
	started time.Time // when cmd started
	// rootless holds the node's namespaces' first process, rootless;
	// nil: the namespace is netjam's (ns).
	rootless *hostnet.Rootless
	waited   chan struct{} // closed when cmd has ended
	waitErr  error         // cmd's end; read after waited is closed
	ended    bool          // netjam ended cmd (the run was over)
	endedMu  sync.Mutex    // guards ended
}

// addNode makes machine i, a node: its namespace and device, and its
// ends in the graph (nodeEnd).
func (l *lab) addNode(b *pathBuilder, i int, hooks labHooks) error {
	m := &l.bp.Machines[i]
	n := &nodeEnd{cfg: l.s.Nodes[m.Node], addrs: m.Addrs}
	l.tun.nodes = append(l.tun.nodes, n)
	if err := l.openNode(n, hooks); err != nil {
		return err
	}
	l.nodeEnd(b, n)
	l.ends[i] = n.end
	return nil
}

// joinNodes joins the nodes, once all are in the graph, the first in the
// peer's place: the links between nodes, the partitions' names, the
// hosts file, and with several nodes the hub, where what reaches the
// client's side for a node turns round and crosses the uplink to it.
func (l *lab) joinNodes(b *pathBuilder) error {
	b.betweenLinks(l.joints)
	l.partitionNames()
	if t := l.tun; t != nil {
		t.peer = t.nodes[0].end
		if err := t.writeEtc(l.s); err != nil {
			return err
		}
	}
	if len(l.joints) > 1 {
		l.hub(b)
	}
	return nil
}

// partitionNames gives the partition each name's addresses: the client
// side's kernel (every station's) and each node's.
func (l *lab) partitionNames() {
	pt := l.partition
	// The client side: the kernel behind the device (every station's
	// addresses), or the lab's client-side hosts.
	for _, e := range l.clients {
		pt.addrs[scenario.ClientNode] = append(pt.addrs[scenario.ClientNode], e.addrs...)
	}
	for _, n := range l.joints {
		pt.addrs[n.name] = n.end.addrs
	}
}

// openNode makes node n's namespace and opens its device there, with a
// default route for each family into it. Rootless (hooks.rootlessNode),
// the namespaces are a user and a network namespace of their own, whose
// first process makes the device and later becomes the command (or holds
// them, without one), as a rootless shell's.
func (l *lab) openNode(n *nodeEnd, hooks labHooks) error {
	t := l.tun
	cfg := hostnet.TUNConfig{Name: t.cfg.Device.Name, Addrs: n.addrs, MTU: t.mtu, Offload: t.cfg.Device.Offload}
	for _, a := range n.addrs {
		def := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		if a.Addr().Is4() {
			def = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		if !slices.Contains(cfg.Routes, def) {
			cfg.Routes = append(cfg.Routes, def)
		}
	}
	if hooks.rootlessNode != nil {
		c := hostnet.RootlessCommand{Env: nodeEnv(n.cfg), Dir: n.cfg.Dir}
		if n.cfg.Run != "" {
			c.Args = []string{"/bin/sh", "-c", n.cfg.Run}
		}
		n.out = nodeOutput(hooks.nodeOutput, n.cfg.Name)
		c.Stdout, c.Stderr = n.out, n.out
		var err error
		if n.dev, n.rootless, err = hooks.rootlessNode(cfg, c); err != nil {
			return fmt.Errorf("node %s: %w", n.cfg.Name, err)
		}
		l.log.Info("node", zap.String("name", n.cfg.Name), zap.String("device", n.dev.Name()), zap.Stringers("addresses", n.addrs),
			zap.Bool("rootless", true), zap.String("link", n.cfg.Link), zap.String("run", n.cfg.Run))
		return nil
	}
	newNetns := hooks.nodeNetns
	if newNetns == nil {
		newNetns = hostnet.NewNetns
	}
	var err error
	if n.ns, err = newNetns(); err != nil {
		return fmt.Errorf("node %s: %w", n.cfg.Name, err)
	}
	cfg.Netns = n.ns.Path()
	open := hooks.openNode
	if open == nil {
		open = openTUN
	}
	if n.dev, err = open(cfg); err != nil {
		return fmt.Errorf("node %s: %w", n.cfg.Name, err)
	}
	l.log.Info("node", zap.String("name", n.cfg.Name), zap.String("device", n.dev.Name()), zap.Stringers("addresses", n.addrs),
		zap.String("netns", n.ns.Path()), zap.String("link", n.cfg.Link), zap.String("run", n.cfg.Run))
	return nil
}

// nodeEnd adds node n's ends: its sends enter the downlink, what the
// uplink has for its addresses reaches its device's inbox.
func (l *lab) nodeEnd(b *pathBuilder, n *nodeEnd) {
	e := &endHost{name: n.cfg.Name, sack: true,
		tx: topology.NewSource(n.cfg.Name+" tx", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)}
	for _, a := range n.addrs {
		e.addrs = append(e.addrs, a.Addr())
	}
	e.v4 = e.addrs[0]
	n.end = e
	l.servers = append(l.servers, e)
	q := n.inbox(l, b, "node "+n.cfg.Name)
	e.in = n.in
	l.joints = append(l.joints, &nodeJoint{name: n.cfg.Name, end: e, tx: b.g.Add(e.tx.Node()), rx: q})
	b.route(b.toServer, l.routers[0], hostPrefixes(e.addrs), q, l.capServer, n.cfg.Name+" rx")
}

// hub turns round, on the client's side, what one node sends another:
// the to-client router hands what it has for a node's address to the
// hub, whose source puts it into the uplink (the paths' router chooses
// the node's link), as a switch in the middle of a star would. The hub
// is a sink and a source, not an edge, so the graph has no cycle; it
// adds no goroutine: the packet goes on on the downlink's, until the
// uplink takes it.
func (l *lab) hub(b *pathBuilder) {
	src := topology.NewSource("hub", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)
	b.g.Link(b.g.Add(src.Node()), b.up)
	in := b.g.Add(topology.Node{Name: "hub in", In: topology.SinkFunc(src.Push), Accepts: topology.Accepts{GSO: topology.Yes, Partial: true}})
	var prefixes []netip.Prefix
	for _, n := range l.joints {
		prefixes = append(prefixes, hostPrefixes(n.end.addrs)...)
	}
	b.route(b.toClient, l.routers[1], prefixes, in, nil, "hub")
}

// close ends the node's command and closes its device and its
// namespace.
func (n *nodeEnd) close(log *zap.Logger) error {
	n.stopNode(log)
	if n.rootless != nil && n.cmd == nil {
		n.rootless.Kill() // never started, or holding the namespaces
	}
	if n.out != nil {
		n.out.Flush()
	}
	err := n.devEnd.close()
	n.ns.Close()
	return err
}

// closeNodes ends every node's command (SIGTERM to all first, so that
// they end together) and closes the nodes and their /etc folder.
func (t *tunEnd) closeNodes(log *zap.Logger) error {
	for _, n := range t.nodes {
		n.terminate()
	}
	var errs []error
	for _, n := range t.nodes {
		errs = append(errs, n.close(log))
	}
	if t.etc != "" {
		os.RemoveAll(t.etc)
	}
	return errors.Join(errs...)
}

func (n *nodeEnd) summary() *summary.NodeSummary {
	ns := &summary.NodeSummary{Name: n.cfg.Name, Device: n.dev.Name(), DeviceStats: n.stats(), Run: n.cfg.Run}
	for _, a := range n.addrs {
		ns.Addresses = append(ns.Addresses, a.String())
	}
	if n.cmd != nil {
		select {
		case <-n.waited:
			st := confine.ExitStatus(n.cmd, nil)
			ns.ExitStatus = &st
			n.endedMu.Lock()
			ns.EndedByNetjam = n.ended
			n.endedMu.Unlock()
		default:
		}
	}
	return ns
}
