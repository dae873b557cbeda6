package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/netjam/netjam/blueprint"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
)

// TUN mode: the machine's kernel on the client side of the path.
//
//	kernel -> device -> read loop -> [cell ->] uplink -> peer host -> relay -> real servers
//	kernel <- device <- inbox <- [cell <-] downlink <- peer host <- relay <- real servers
//
// The device's read loop puts each packet the kernel sends into the path
// (or onto the Wi-Fi medium, when the device is a station); the kernel's
// endpoint on the client side is an inbox whose goroutine writes what the
// downlink delivers into the device. On the server side a netstack host,
// the peer, owns the peer addresses: it terminates the kernel's TCP
// connections and UDP datagrams, is the sink of kernel flows, and relays
// the rest to real servers (stack.Relay).
//
// Nothing here survives netjam: the device is not persistent, so the
// kernel deletes it, its addresses and its routes when netjam's descriptor
// closes, on a crash or a SIGKILL too; a namespace netjam makes is
// anonymous and goes with its last process.

// openDevice opens the TUN device; tests replace it with an in-memory one.
type openDevice func(cfg hostnet.TUNConfig) (hostnet.Device, error)

// labHooks are what tests replace in a lab: how the device is opened and
// how the relay dials.
type labHooks struct {
	open openDevice
	// openNode opens a node's device, nodeNetns makes its namespace;
	// nil: hostnet's.
	openNode  openDevice
	nodeNetns func() (*hostnet.Netns, error)
	// rootlessNode, when not nil, starts a node's namespaces rootless
	// (Options.OpenNode); nodeOutput takes the nodes' output.
	rootlessNode func(hostnet.TUNConfig, hostnet.RootlessCommand) (*hostnet.TUN, *hostnet.Rootless, error)
	nodeOutput   io.Writer
	dial         func(ctx context.Context, network, address string) (net.Conn, error)
}

func openTUN(cfg hostnet.TUNConfig) (hostnet.Device, error) {
	t, err := hostnet.OpenTUN(cfg)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// tunEnd is TUN mode's part of a lab.
type tunEnd struct {
	cfg *scenario.TUN
	// devEnd is the device of the kernel on the client side: its inbox
	// is the one every client-side end of the kernel writes through.
	devEnd
	mtu int
	// kernels are the client-side endpoints, all writing into dev: one
	// per Wi-Fi station the kernel sits behind (in the order of
	// cfg.Stations), or one wired endpoint.
	kernels []*endHost
	// fromStation maps a source address of the kernel to its station's
	// endpoint, for packets read from the device; packets from any other
	// address (link-local, say) count as the first's.
	fromStation map[netip.Addr]*endHost
	peer        *endHost // the server-side host owning the peer addresses
	relay       *stack.Relay
	// peerAddrs are the peer's addresses (blueprint's); peerAddr the
	// first, IPv4 when the device has IPv4.
	peerAddrs []netip.Prefix
	peerAddr  netip.Addr
	// pathAddrs are the peer's address on each path whose match has a
	// dst (blueprint.Net.PathPeer); routes, the networks routed into the
	// device (blueprint.Net.DeviceRoutes).
	pathAddrs map[string]netip.Addr
	routes    []netip.Prefix
	// dq is the device's inbox in the graph.
	dq topology.ID

	// nodes are the scenario's nodes, the first in the peer's place
	// (its kernel owns the peer's addresses); none: the peer, a netstack
	// host. etc is the folder of the files they (and the client's
	// command) see in /etc, removed when the lab closes.
	nodes []*nodeEnd
	etc   string
}

// openDevice starts TUN mode's part of s: it opens the device (read
// once the lab starts) and adds its inbox to the path. The kernel's ends
// (kernelEnd), the peer's (peerEnds, whose host startPeer makes once the
// graph is compiled) or the nodes' (addNode) are machines of their own.
func (l *lab) openDevice(b *pathBuilder, s *scenario.Scenario, hooks labHooks) error {
	c := s.TUN
	t := &tunEnd{cfg: c, fromStation: map[netip.Addr]*endHost{}, mtu: c.Device.MTU}
	l.tun = t
	far := l.bp.Kinds(blueprint.Peer)
	if len(far) == 0 {
		far = l.bp.Kinds(blueprint.Node) // the first node is in the peer's place
	}
	t.peerAddrs = l.bp.Machines[far[0]].Addrs
	t.peerAddr = t.peerAddrs[0].Addr()
	t.pathAddrs, t.routes = l.bp.PathPeer, l.bp.DeviceRoutes
	if t.mtu == 0 {
		t.mtu = s.MTU
	}
	addrs, err := t.open(hooks.open)
	if err != nil {
		return err
	}
	t.dq = l.deviceEnd(b)
	l.log.Info("TUN device", zap.String("device", t.dev.Name()), zap.Stringers("kernel", addrs),
		zap.Stringers("peer", t.peerAddrs), zap.Int("mtu", t.mtu), zap.String("netns", c.Device.Netns), zap.Strings("stations", c.Stations),
		zap.Stringers("routes", t.routes))
	return nil
}

// open opens the device (in its namespace) as the scenario describes it,
// with the kernel's addresses and one more per further station, in the
// same networks, which it returns.
func (t *tunEnd) open(open openDevice) ([]netip.Prefix, error) {
	c := t.cfg
	var err error
	if c.Device.Netns != "" {
		if t.ns, err = hostnet.OpenNetns(c.Device.Netns); err != nil {
			return nil, err
		}
	}
	cfg := c.Device
	cfg.Addrs = slices.Clone(c.Device.Addrs)
	for _, sa := range c.StationAddrs[min(1, len(c.StationAddrs)):] {
		for i, a := range sa {
			cfg.Addrs = append(cfg.Addrs, netip.PrefixFrom(a, c.Device.Addrs[i].Bits()))
		}
	}
	cfg.MTU, cfg.Routes = t.mtu, t.routes
	t.dev, err = open(cfg)
	return cfg.Addrs, err
}

// deviceEnd adds the device's inbox and the device behind it, and
// returns the inbox.
func (l *lab) deviceEnd(b *pathBuilder) topology.ID { return l.tun.inbox(l, b, "device") }

// kernelEnd adds the ends of machine i, one of the kernel's on the
// client side: what the device's read loop reads from its addresses
// enters the uplink (or the medium, as its station's), what is for its
// addresses reaches the device's inbox.
func (l *lab) kernelEnd(b *pathBuilder, i int) {
	t, m := l.tun, &l.bp.Machines[i]
	var addrs []netip.Addr
	for _, a := range m.Addrs {
		addrs = append(addrs, a.Addr())
	}
	k := &endHost{name: m.Name, addrs: addrs, v4: addrs[0], sack: true, in: t.in,
		tx: topology.NewSource(m.Name+" tx", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)}
	t.kernels = append(t.kernels, k)
	l.clients = append(l.clients, k)
	l.ends[i] = k
	if m.Station == "" {
		b.wire(b.g.Add(k.tx.Node()), b.up, l.capClient, m.Name+" tx")
		b.route(b.toClient, l.routers[1], hostPrefixes(addrs), t.dq, l.capClient, m.Name+" rx")
		return
	}
	k.station = m.Station
	b.stationEnds(m.Station, b.g.Add(k.tx.Node()), t.dq, k.addrs)
	l.stations[m.Station] = k
	for _, a := range k.addrs {
		t.fromStation[a] = k
	}
}

// peerEnds adds the ends of the peer host: what it sends enters the
// downlink (large segments whole: the graph splits them where a node
// needs it); what is for its addresses, or for any destination when
// transparent, reaches it through its inbox. The peer takes what left
// the uplink together merged (GRO), as a NIC hands the kernel's TCP its
// segments: the senders are the kernel's, whose loss detection counts
// bytes, not ACKs.
func (l *lab) peerEnds(b *pathBuilder, i int) {
	t := l.tun
	p := &endHost{name: "peer", v4: t.peerAddr, sack: true,
		tx: topology.NewSource("peer tx", topology.Emits{GSO: true, Partial: true}, l.pool, l.bigPool)}
	for _, a := range t.peerAddrs {
		p.addrs = append(p.addrs, a.Addr())
	}
	t.peer = p
	l.servers = append(l.servers, p)
	l.ends[i] = p
	m := &mergingEnd{e: p, maxBytes: l.bigPool.Size(), vec: make([][]byte, 0, topology.MaxBatch)}
	q := b.inbox(p, m.node())
	b.wire(b.g.Add(p.tx.Node()), b.down, l.capServer, "peer tx")
	prefixes := hostPrefixes(p.addrs)
	if t.cfg.Relay.Transparent {
		prefixes = append(prefixes, netip.Prefix{}) // its relay takes any destination (and refuses what is not allowed)
	}
	b.route(b.toServer, l.routers[0], prefixes, q, l.capServer, "peer rx")
}

// startPeer makes the peer host and starts its relay. Its TCP is held
// back at a full direction, as a lab host's is (outputHeld): what the
// directions from the peer hand on goes into the device, whose writes
// never wait for the peer, so no cycle of waits can close; a relayed
// connection then stops reading its target, and the target's own TCP
// waits.
func (l *lab) startPeer(s *scenario.Scenario, hooks labHooks) error {
	t, c := l.tun, l.tun.cfg
	h, err := stack.NewHost(stack.HostConfig{
		Name: "peer", Addrs: t.peerAddrs, MTU: t.mtu, Clock: l.clk, Seed: s.Seed + 2*blueprint.PeerSeedIndex + 1, SACK: true,
		Transparent: c.Relay.Transparent, OutputGSO: l.outputGSO(t.peer), OutputHeld: l.outputHeld(t.peer), Log: l.log,
	})
	if err != nil {
		return err
	}
	t.peer.host = h
	rc := c.Relay
	rc.Forwards = t.pathForwards()
	rc.Dial, rc.Log = hooks.dial, l.log
	// The relay's UDP sheds at its sockets when the downlink is full, as
	// the read loop does at the device (see shedding).
	rc.Busy = l.path.Down.Full
	t.relay, err = h.StartRelay(context.Background(), rc)
	return err
}

// pathForwards returns the relay's forwards, those that name a path
// (tun.forward[].path) bound to the peer's address on it: the path's own
// (pathPeers), or for a path without one, the peer's.
func (t *tunEnd) pathForwards() []hostcfg.Forward {
	fws := slices.Clone(t.cfg.Relay.Forwards)
	for i, name := range t.cfg.ForwardPaths {
		if name == "" || i >= len(fws) {
			continue
		}
		if a, ok := t.pathAddrs[name]; ok {
			fws[i].Addrs = []netip.Addr{a}
		} else {
			fws[i].Addrs = slices.Clone(t.cfg.Peer)
		}
	}
	return fws
}

// startTUN starts the devices' read loops: the kernel's packets enter
// the uplink (or the medium, as its station's), with no shedding behind
// a cell, which keeps its own queues; a node's enter the downlink.
func (l *lab) startTUN() {
	t := l.tun
	var full func() bool
	if len(t.cfg.Stations) == 0 {
		full = l.path.Up.Full
	}
	t.startReading(t.kernels[0].tx, full, l.fromKernel)
	for _, n := range t.nodes {
		tx := n.end.tx
		n.startReading(tx, l.path.Down.Full, func(buf *impair.Packet, size int, g netif.GSO) bool {
			return tx.Take(l.clk.Now(), buf, size, g)
		})
	}
}

// maxGSOPacket is the largest packet a device with offload hands over.
const maxGSOPacket = 65535

// fromKernel puts a packet the kernel sent, the first n bytes of buf (a
// buffer of the read loop's, well-formed), into the path at its
// endpoint: onto the medium when the device is a Wi-Fi station, into the
// uplink otherwise (a large TCP segment whole: the graph splits it, on
// the read loop's goroutine, where the next node takes MTU-sized packets
// only). It reports whether buf went into the path
// (topology.Source.Take).
func (l *lab) fromKernel(buf *impair.Packet, n int, g netif.GSO) bool {
	t := l.tun
	k := t.kernels[0]
	if len(t.kernels) > 1 {
		if e := t.fromStation[srcAddr(buf.Data[:n])]; e != nil {
			k = e
		}
	}
	return k.tx.Take(l.clk.Now(), buf, n, g)
}

// srcAddr returns the source address of a well-formed IPv4 or IPv6 packet.
func srcAddr(b []byte) netip.Addr {
	if b[0]>>4 == 4 {
		return netip.AddrFrom4([4]byte(b[12:16]))
	}
	return netip.AddrFrom16([16]byte(b[8:24]))
}

// wellFormed reports whether b is an IPv4 or IPv6 packet whose header fits
// and whose length field says len(b), which every packet a TUN device
// returns is.
func wellFormed(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return false
		}
		ihl := int(b[0]&0x0f) * 4
		total := int(b[2])<<8 | int(b[3])
		return ihl >= 20 && ihl <= total && total == len(b)
	case 6:
		return len(b) >= 40 && 40+(int(b[4])<<8|int(b[5])) == len(b)
	}
	return false
}

// stopTUN closes the devices, which ends their read loops, and waits for
// them. It runs before the path closes, so that no loop sends into a
// closed direction.
func (l *lab) stopTUN() error {
	t := l.tun
	if t == nil {
		return nil
	}
	var errs []error
	if len(t.nodes) > 0 {
		errs = append(errs, t.closeNodes(l.log))
	}
	return errors.Join(append(errs, t.close())...)
}

func (l *lab) tunSummary() *summary.TUNSummary {
	t := l.tun
	if t == nil || t.dev == nil {
		return nil
	}
	ts := &summary.TUNSummary{Device: t.dev.Name(), DeviceStats: t.stats()}
	for _, n := range t.nodes {
		ts.Nodes = append(ts.Nodes, *n.summary())
	}
	if l.partition != nil {
		ts.PartitionDrops = l.partition.drops.Load()
	}
	ts.Routers = l.hopSummaries()
	for _, a := range t.cfg.Device.Addrs {
		ts.Kernel = append(ts.Kernel, a.String())
	}
	for j, name := range t.cfg.Stations {
		for _, a := range t.cfg.StationAddrs[j] {
			ts.Stations = append(ts.Stations, name+" "+a.String())
		}
	}
	for _, p := range t.cfg.Peer {
		ts.Peer = append(ts.Peer, p.String())
	}
	for _, p := range l.s.Paths {
		if a, ok := t.pathAddrs[p.Name]; ok {
			ts.Peer = append(ts.Peer, a.String()+" (path "+p.Name+")")
		}
	}
	for _, f := range t.pathForwards() {
		at := []netip.Addr{t.peerAddr}
		if len(f.Addrs) > 0 {
			at = f.Addrs
		}
		for _, a := range at {
			ts.Forwards = append(ts.Forwards, fmt.Sprintf("%s %s -> %s", f.Proto, netip.AddrPortFrom(a, f.Listen), f.To))
		}
	}
	if t.relay != nil {
		ts.Relay = t.relay.Stats()
	}
	if t.peer != nil && t.peer.host != nil {
		st := t.peer.host.Stats()
		ts.PeerTCP, ts.PeerChecksumErrors, ts.PeerMalformed = st.TCP, st.ChecksumErrors, st.Malformed
	}
	return ts
}

// IsPrivilege reports whether err comes from a missing privilege (no TUN
// device node, no CAP_NET_ADMIN): the command line exits with status 2.
func IsPrivilege(err error) bool { return errors.Is(err, hostnet.ErrPrivilege) }

// privilegeReason is a privilege error without its advice, in plain
// words, for a skipped run's row: what is needed, then what failed. The
// advice is the caller's to give, once, at the end.
func privilegeReason(err error) string {
	var pe *hostnet.PrivilegeError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s (%s: %v)", strings.TrimSuffix(pe.Need, "."), pe.Op, pe.Err)
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, " Either:")
}
