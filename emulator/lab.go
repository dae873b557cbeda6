package emulator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/blueprint"
	"github.com/netjam/netjam/capture"
	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
	"github.com/netjam/netjam/wifi"
)

// A lab is the rootless topology of one run: gVisor hosts on the client
// side and on the server side of the emulated path (see labpath.go for
// the graph that joins them).
//
// Packets a client-side host sends enter the uplink (through the Wi-Fi
// cell first, when the scenario has one); what leaves the uplink is handed
// to the server-side host that owns its destination address, and the other
// way round for the downlink (whose packets for a station cross the cell
// last).
//
// Hosts: gVisor switches SACK per stack, not per socket, so flows that
// differ in SACK run on different hosts: one client and one server host per
// SACK setting in use. With a Wi-Fi cell, each station is a client host of
// its own (its flows must then agree on SACK; package scenario checks).
//
// Addresses: client host i has 10.0.0.(1+i) and fd00::(1+i), server host
// i has 10.0.0.(101+i) and fd00::(101+i), in 10.0.0.0/24 and fd00::/64:
// up to 100 hosts a side.
type lab struct {
	s *scenario.Scenario
	// bp is s compiled: the machines, their addresses, the flows' ends;
	// ends[i] is the end of bp.Machines[i] once added (nil before).
	bp   *blueprint.Net
	ends []*endHost
	path *Path
	cell *wifi.Runner // nil without a Wi-Fi cell
	pool *impair.Pool
	// bigPool holds GSO packets (see impair.Packet.SetGSO); pool the
	// MTU-sized rest.
	bigPool *impair.Pool
	// clients and servers are the ends of each side, stations the
	// client-side end of each Wi-Fi station by name. All are written
	// before the path starts, then only read.
	clients, servers []*endHost
	stations         map[string]*endHost

	// net is the compiled path; routers are its to-server and to-client
	// routers, lives what was built with a goroutine of its own (closed
	// by close when the graph did not compile).
	net     *topology.Net
	routers [2]*topology.Router
	// pathRouters choose the path of packets, at the paths' entries and
	// after links several paths cross.
	pathRouters []*topology.Router
	lives       []topology.Life

	clk clock.Clock
	log *zap.Logger
	// capClient and capServer write the packets seen at the client and
	// server side (nil: no capture there); capLinks those at the ends of
	// links, by point (eu.server).
	capClient, capServer *capture.Writer
	capLinks             map[string]*capture.Writer

	// tun is TUN mode's part; nil without a tun section.
	tun *tunEnd
	// partition filters the paths' entries by the nodes' partition; nil
	// without nodes. hops are the routers in front of the links, with
	// nodes.
	partition *partition
	hops      []hopEnd
	// joints are the nodes as the graph joins them, kernel or netstack
	// (see betweenLinks, hub).
	joints []*nodeJoint
}

// endHost is a host at one end of the path: a netstack host, or the
// kernel behind the TUN device (whose host is nil).
type endHost struct {
	name  string
	host  *stack.Host
	in    *topology.Queue // its inbox; for the kernel the device's
	addrs []netip.Addr    // the addresses routed to it
	v4    netip.Addr
	sack  bool
	// station is its Wi-Fi station's name; "" for a wired end.
	station string
	// tx is where what it sends enters the path; txID its node.
	tx   *topology.Source
	txID topology.ID
	// catchAll: the uplink's packets for destinations no end owns go to
	// this server host.
	catchAll bool
	// prefixes are its addresses with their networks (stack.HostConfig's
	// Addrs); path, a server's, the name of the path it ends.
	prefixes []netip.Prefix
	path     string
	// settle, on a virtual clock, lets the host take up each packet its
	// inbox hands it before the next (see endHost.inject); nil otherwise.
	settle *clock.Settler
}

// putWait bounds how long an inbox waits for room when its host falls
// behind (see topology.Queue): far longer than a host busy with a burst
// takes (an inbox of inboxLen packets is about 1 ms of work), short
// enough that a stuck host does not stop the path. No wait cycle is
// possible: an inbox's goroutine only injects into its host, whose
// replies enter a direction without waiting.
const putWait = 100 * time.Millisecond

// inboxLen and inboxBytes bound what waits for a host (or the device):
// 1024 packets, about 1 ms at 10 Gbit/s of 1500-byte packets, and 4 MiB,
// 64 large segments that crossed whole, the same at 32 Gbit/s. A host
// that far behind holds up the direction feeding it (see
// topology.Queue), and one stuck for putWait loses the packet, counted.
const (
	inboxLen   = 1024
	inboxBytes = 4 << 20
)

// addrLike returns e's first address of a's family (e.v4 if none).
func (e *endHost) addrLike(a netip.Addr) netip.Addr {
	for _, b := range e.addrs {
		if b.Is4() == a.Is4() {
			return b
		}
	}
	return e.v4
}

// newLab builds the path, the Wi-Fi cell and the hosts the flows of s
// need, or hosts when given (a Bench's: its own, and no host for a
// station it does not sit behind), as s compiles (blueprint.Compile).
// Nothing runs until start; close releases everything, also after a
// failed newLab.
func newLab(s *scenario.Scenario, clk clock.Clock, log *zap.Logger, outDir *outdir.Dir, hooks labHooks, hosts ...blueprint.Machine) (*lab, error) {
	if len(s.Links) == 0 {
		// Not from scenario.Parse: its link is the one.
		c := *s
		c.Links = []scenario.Link{linkAt(s, 0)}
		c.Paths = []scenario.Path{{Name: scenario.DefaultPath, Via: []string{scenario.DefaultLink}}}
		s = &c
	}
	l := &lab{
		s:    s,
		clk:  clk,
		log:  log,
		pool: impair.NewPool(s.MTU),
		// Large TCP segments from a TUN device with offload.
		bigPool:  impair.NewPool(maxGSOPacket),
		stations: map[string]*endHost{},
	}
	fail := func(err error) (*lab, error) {
		l.close()
		return nil, err
	}
	var err error
	if l.bp, err = blueprint.Compile(s, blueprint.Options{Hosts: hosts}); err != nil {
		return fail(err)
	}
	l.ends = make([]*endHost, len(l.bp.Machines))
	if err := l.openCaptures(s, outDir); err != nil {
		return fail(err)
	}
	b, err := newPathBuilder(l, s)
	if err != nil {
		return fail(err)
	}
	for i := range l.bp.Machines {
		if err := l.addMachine(b, i, hooks); err != nil {
			return fail(err)
		}
	}
	if len(l.joints) > 0 {
		if err := l.joinNodes(b); err != nil {
			return fail(err)
		}
	}
	if l.net, err = b.compile(); err != nil {
		return fail(err)
	}
	for _, i := range l.bp.Kinds(blueprint.Netstack) {
		if err := l.newHost(s, i, b.g.Whole(l.ends[i].txID)); err != nil {
			return fail(err)
		}
	}
	if l.tun != nil && len(l.tun.nodes) == 0 {
		return l, l.startPeer(s, hooks)
	}
	return l, nil
}

// hostSummaries returns what each netstack host dropped on arrival and its
// TCP's counters, the client side's hosts first.
func (l *lab) hostSummaries() []summary.HostSummary {
	var hs []summary.HostSummary
	for _, e := range append(slices.Clip(l.clients), l.servers...) {
		if e.host == nil {
			continue
		}
		st := e.host.Stats()
		hs = append(hs, summary.HostSummary{Name: e.name, ChecksumErrors: st.ChecksumErrors, Malformed: st.Malformed, TCP: st.TCP})
	}
	return hs
}

// addMachine adds machine i of the blueprint to the graph, whatever its
// kind: a netstack host's ends; a kernel's, behind the TUN device (opened
// at the first: once it is up, the kernel may send, and the kernel's
// machines come after the netstack hosts); the peer's; a node's, with
// its namespace and device.
func (l *lab) addMachine(b *pathBuilder, i int, hooks labHooks) error {
	switch l.bp.Machines[i].Kind {
	case blueprint.Netstack:
		l.addEnd(b, i)
	case blueprint.Kernel:
		if l.tun == nil {
			if err := l.openDevice(b, l.s, hooks); err != nil {
				return err
			}
		}
		l.kernelEnd(b, i)
	case blueprint.Peer:
		l.peerEnds(b, i)
	case blueprint.Node:
		return l.addNode(b, i, hooks)
	}
	return nil
}

// addEnd adds the ends of netstack host number i of the blueprint to
// the graph; newHost makes the host once the graph is compiled.
func (l *lab) addEnd(b *pathBuilder, i int) {
	m := &l.bp.Machines[i]
	e := &endHost{name: m.Name, sack: m.SACK, station: m.Station, catchAll: m.CatchAll, path: m.Path, prefixes: m.Addrs}
	for _, a := range e.prefixes {
		e.addrs = append(e.addrs, a.Addr())
	}
	e.v4 = e.addrs[0]
	if m.Node >= 0 {
		b.addNodeHost(e)
	} else {
		b.addHost(e, m.Server)
	}
	if m.Server {
		l.servers = append(l.servers, e)
	} else {
		l.clients = append(l.clients, e)
	}
	if e.station != "" {
		l.stations[e.station] = e
	}
	l.ends[i] = e
}

// newHost makes the netstack host of machine i of the blueprint.
//
// With segmentation offload (host GSO), as a host with TSO sends, for
// the connections made while the path takes large segments whole (whole,
// the graph's report for the host's source: topology.Graph.Whole; a
// sender handing over a window in a few calls would outrun a direction
// that takes it packet by packet and overflow its input, measured as
// input drops and retransmissions at 100 Gbit/s, where gVisor segmenting
// itself never overflowed it): their TCP hands the path segments of up to 64 KiB, which
// cross every node that takes them whole (a direction while no stage
// decides per packet) and reach the receiving host whole while the path
// loses nothing by chance (lab.takeWhole; split in front of it otherwise,
// so that it acknowledges them as it would MTU-sized packets). Should a live
// change make a node need MTU-sized packets, the graph splits them in
// front of it, and the receiver then gets those packets one by one. What gVisor's receiver does with a
// whole segment is what Linux does with a GRO packet: one ACK when it
// has processed it, for all its bytes; its sender grows its window by
// the segments acknowledged, not by ACKs, so slow start doubles per
// round trip all the same, and a clean path has no loss for fewer ACKs
// to slow down. Segments that a per-packet stage let through one by one
// are not merged again before the host: gVisor's TCP without SACK counts
// duplicate ACKs, one per packet it takes, and merged packets would hold
// back its fast retransmit (see docs/accuracy.md on GRO).
func (l *lab) newHost(s *scenario.Scenario, i int, whole func() bool) error {
	m, e := &l.bp.Machines[i], l.ends[i]
	seed := s.Seed + 2*uint64(m.Index)
	if m.Server {
		seed++
	}
	e.settle = clock.NewSettler(l.clk)
	var err error
	e.host, err = stack.NewHost(stack.HostConfig{
		Name: e.name, Addrs: e.prefixes, MTU: s.MTU, Clock: l.clk, Seed: seed, SACK: m.SACK,
		OutputGSO: l.outputGSO(e), OutputHeld: l.outputHeld(e), GSOWhen: whole, Log: l.log, Transparent: m.Transparent,
	})
	return err
}

// flowEnds returns the client-side and server-side ends of flow number
// i.
func (l *lab) flowEnds(i int) (client, server *endHost) {
	f := l.bp.Flows[i]
	return l.ends[f.Client], l.ends[f.Server]
}

// outputGSO returns a host's OutputGSO: into the path at e, a large
// segment whole (the graph splits it where a node needs it, on the
// sender's goroutine).
func (l *lab) outputGSO(e *endHost) func([][]byte, netif.GSO) {
	return func(slices [][]byte, g netif.GSO) { e.tx.Copy(l.clk.Now(), slices, g) }
}

// outputHeld returns a host's OutputHeld: its TCP into the path at e,
// held back at a full direction (or Wi-Fi cell) rather than dropped there.
// The directions it waits for wait only for inboxes, whose goroutines
// hand packets to the hosts without waiting for the hosts' connections:
// no cycle of waits can close.
func (l *lab) outputHeld(e *endHost) func([][]byte, netif.GSO) {
	return func(slices [][]byte, g netif.GSO) { e.tx.CopyHeld(l.clk.Now(), slices, g) }
}

func (l *lab) start(ctx context.Context) {
	l.net.Start(ctx)
	if l.tun != nil {
		l.startTUN()
	}
}

// tooLarge returns the packets larger than the pools' buffers (never with
// a sane MTU).
func (l *lab) tooLarge() uint64 {
	var n uint64
	for _, e := range append(l.clients, l.servers...) {
		n += e.tx.TooLarge()
	}
	return n
}

// noRoute returns the packets whose destination no end owns.
func (l *lab) noRoute() uint64 {
	var n uint64
	for _, r := range append(l.routers[:], l.pathRouters...) {
		if r != nil {
			n += r.NoRoute()
		}
	}
	return n
}

// deliveryCounts returns, for the hosts of one side (the server side:
// what the uplink delivered; or the client side), the packets dropped
// because their host fell behind and the times a direction waited for
// room in their inboxes.
func (l *lab) deliveryCounts(serverSide bool) (drops, waits uint64) {
	for _, q := range l.inboxes(serverSide) {
		drops += q.Full()
		waits += q.Waits()
	}
	return drops, waits
}

// inboxes returns the inboxes of one side's hosts, each once: the
// kernel's ends share the device's.
func (l *lab) inboxes(serverSide bool) []*topology.Queue {
	side := l.clients
	if serverSide {
		side = l.servers
	}
	var qs []*topology.Queue
	for _, e := range side {
		if e.in != nil && !slices.Contains(qs, e.in) {
			qs = append(qs, e.in)
		}
	}
	return qs
}

// close stops the packet sources in the path first (the TUN device and its
// read loop, then the graph's nodes from its sources on: the cell, the
// directions, the inboxes), so that nothing is delivered into a host
// being closed, then the hosts (and with them every endpoint they made),
// then the relay, which waits for its goroutines. Safe to call more than
// once.
func (l *lab) close() {
	if err := l.stopTUN(); err != nil {
		l.log.Error("closing the TUN device", zap.Error(err))
	}
	if l.net != nil {
		l.net.Close()
	} else {
		for _, lf := range l.lives {
			lf.Close()
		}
	}
	for _, e := range append(l.clients, l.servers...) {
		if e.host != nil {
			e.host.Close()
		}
	}
	if l.tun != nil {
		if l.tun.relay != nil {
			l.tun.relay.Close()
		}
		l.tun.ns.Close()
	}
	for _, cw := range append([]*capture.Writer{l.capClient, l.capServer}, slices.Collect(maps.Values(l.capLinks))...) {
		if cw != nil {
			cw.Close()
		}
	}
}

// openCaptures opens the pcap writers the scenario asks for in dir:
// <point>.pcap, or <point>-<variant>.pcap.
func (l *lab) openCaptures(s *scenario.Scenario, dir *outdir.Dir) error {
	if s.Capture == nil || len(s.Capture.Points) == 0 {
		return nil
	}
	if dir == nil {
		return errors.New("capture needs an output folder")
	}
	o := s.Capture.Options
	ends := scenario.LinkEnds(s.Links)
	// On a virtual clock, packets of one instant are written in one
	// order, whichever goroutine records them first.
	_, o.SortInstants = l.clk.(*clock.Virtual)
	for _, pt := range s.Capture.Points {
		if !slices.Contains(scenario.CapturePoints, pt) && !slices.Contains(ends, pt) {
			// A --capture the scenario's links do not have.
			return fmt.Errorf("capture %s: no such point (the points: %s)", pt, strings.Join(append(slices.Clone(scenario.CapturePoints), ends...), ", "))
		}
		name := pt
		if s.Variant != "" {
			name += "-" + s.Variant
		}
		w, err := capture.OpenIn(dir, name+".pcap", o)
		if err != nil {
			return err
		}
		switch pt {
		case "client":
			l.capClient = w
		case "server":
			l.capServer = w
		default:
			if l.capLinks == nil {
				l.capLinks = map[string]*capture.Writer{}
			}
			l.capLinks[pt] = w
		}
	}
	return nil
}

// captureStats returns the capture counters by point.
func (l *lab) captureStats() map[string]summary.CaptureSummary {
	m := map[string]summary.CaptureSummary{}
	all := map[string]*capture.Writer{"client": l.capClient, "server": l.capServer}
	maps.Copy(all, l.capLinks)
	for name, cw := range all {
		if cw != nil {
			st := cw.Stats()
			m[name] = summary.CaptureSummary{Packets: st.Packets, Truncated: st.Truncated, Files: st.Files, NotWritten: st.NotWritten, Full: st.Full}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
