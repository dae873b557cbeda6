package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/capture"
	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
	"github.com/netjam/netjam/wifi"
)

// A lab is the rootless topology of one run: gVisor hosts on the client
// side and on the server side of the emulated path.
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
	path *Path
	cell *wifi.Runner // nil without a Wi-Fi cell
	pool *impair.Pool
	// bigPool holds GSO packets (see impair.Packet.SetGSO); pool the
	// MTU-sized rest.
	bigPool *impair.Pool
	// clients and servers are the hosts of each side; client and server
	// map every address to its host. All are written before the path
	// starts, then only read.
	clients, servers []*endHost
	client, server   map[netip.Addr]*endHost

	clk clock.Clock
	log *zap.Logger
	// capClient and capServer write the packets seen at the client and
	// server side (nil: no capture there).
	capClient, capServer *capture.Writer

	// tun is TUN mode's part; nil without a tun section.
	tun *tunEnd

	// catchAll, when not nil, is the server-side host that takes the
	// uplink's packets for destinations no host owns (a Bench's relay).
	catchAll *endHost
	// transparent makes the server-side hosts take any destination (see
	// stack.HostConfig.Transparent).
	transparent bool

	noRoute  atomic.Uint64 // packets whose destination no host owns
	tooLarge atomic.Uint64 // packets larger than the pool's buffers (never with a sane MTU)
}

// endHost is a host at one end of the path: a netstack host, or the
// kernel behind the TUN device (whose host is nil).
type endHost struct {
	host    *stack.Host
	in      *inbox
	v4      netip.Addr
	sack    bool
	station int // its index in the Wi-Fi cell; -1 for a wired host
	// send puts a packet from this end into the path (the kernel's
	// endpoints: the uplink, or the medium as its station).
	send func(p *impair.Packet)
}

// inbox hands the packets leaving a direction to one host on a goroutine
// of its own, so that the direction's scheduler does not wait for gVisor
// to process each packet (or for a write into the TUN device): at high
// rates the two then share the machine's cores instead of taking turns on
// one.
//
// When the host falls behind and the inbox is full, put waits for room
// (up to putWait): backpressure, as a real NIC's full ring stops the
// queue feeding it, so that a path configured to lose nothing loses
// nothing inside netjam. The wait holds up the direction's scheduler (its
// packets run late, which the lateness figures show) and, through the
// direction's bounded input, the sender. No wait cycle is possible: the
// inbox's goroutine only injects into its host, whose replies enter a
// direction without waiting. Only a host stuck for putWait loses the
// packet, counted in full and reported as netjam's own drop.
type inbox struct {
	ch    chan *impair.Packet
	full  atomic.Uint64 // packets dropped after putWait: the host was stuck
	waits atomic.Uint64 // puts that found the inbox full and waited
	done  chan struct{}
	once  sync.Once
}

// putWait bounds how long a put waits for a full inbox: far longer than a
// host busy with a burst takes (an inbox of inboxLen packets is about 1 ms
// of work), short enough that a stuck host does not stop the path.
const putWait = 100 * time.Millisecond

// inboxLen bounds the packets waiting for a host: about 1 ms at 10 Gbit/s
// of 1500-byte packets; a host that far behind is overloaded, and the drop
// is counted.
const inboxLen = 1024

// newInbox starts an inbox that hands each packet to deliver, which owns
// it (and releases it).
func newInbox(deliver func(p *impair.Packet)) *inbox {
	b := &inbox{ch: make(chan *impair.Packet, inboxLen), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for p := range b.ch {
			deliver(p)
		}
	}()
	return b
}

// inboxBatch bounds the packets a batch inbox hands over at once.
const inboxBatch = 64

// newBatchInbox starts an inbox that hands deliver every packet waiting
// when it looks, up to inboxBatch at a time: those that arrived while it
// was busy (a burst), never waiting for more. deliver owns them.
func newBatchInbox(deliver func(ps []*impair.Packet)) *inbox {
	b := &inbox{ch: make(chan *impair.Packet, inboxLen), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		batch := make([]*impair.Packet, 0, inboxBatch)
		for p := range b.ch {
			batch = append(batch[:0], p)
		more:
			for len(batch) < inboxBatch {
				select {
				case q, ok := <-b.ch:
					if !ok {
						break more
					}
					batch = append(batch, q)
				default:
					break more
				}
			}
			deliver(batch)
			clear(batch)
		}
	}()
	return b
}

// put hands p over, waiting up to putWait for room (see inbox).
func (b *inbox) put(p *impair.Packet) {
	select {
	case b.ch <- p:
		return
	default:
	}
	// Full: only now a timer, so the common case allocates nothing.
	b.waits.Add(1)
	t := time.NewTimer(putWait)
	defer t.Stop()
	select {
	case b.ch <- p:
	case <-t.C:
		b.full.Add(1)
		p.Release()
	}
}

// close stops the inbox once its queue is drained; idempotent. Nothing may
// put after.
func (b *inbox) close() {
	b.once.Do(func() {
		close(b.ch)
		<-b.done
	})
}

const maxHosts = 100

func hostAddrs(i int, server bool) []netip.Prefix {
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

// newLab builds the path, the Wi-Fi cell and the hosts the flows of s
// need. Nothing runs until start; close releases everything, also after a
// failed newLab.
func newLab(s *scenario.Scenario, clk clock.Clock, log *zap.Logger, outDir string, hooks labHooks) (*lab, error) {
	l := &lab{
		clk:  clk,
		log:  log,
		pool: impair.NewPool(s.MTU),
		// Large TCP segments from a TUN device with offload.
		bigPool: impair.NewPool(maxGSOPacket),
		client:  map[netip.Addr]*endHost{},
		server:  map[netip.Addr]*endHost{},
	}
	var err error
	l.path, err = newPath(s, clk, l.deliver(true), l.deliver(false))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*lab, error) {
		l.close()
		return nil, err
	}
	if err := l.openCaptures(s, outDir); err != nil {
		return fail(err)
	}
	var tunStations []int // the cell's stations the kernel sits behind
	if s.WiFi != nil {
		cfg := *s.WiFi // the scenario's cell, with the run's seed
		cfg.Seed = s.Seed
		l.cell, err = wifi.NewRunner(cfg, clk, l.fromCell(true), l.fromCell(false))
		if err != nil {
			return fail(err)
		}
		for i, st := range s.WiFi.Stations {
			if s.TUN != nil && s.TUN.Station(st.Name) >= 0 {
				tunStations = append(tunStations, i) // the kernel's endpoints go here, see setupTUN
				continue
			}
			sack := true
			for _, f := range s.Flows {
				if f.Station == st.Name && f.Type == "tcp" {
					sack = f.SACK
				}
			}
			if _, err := l.addHost(s, clk, log, false, sack, i, st.Name); err != nil {
				return fail(err)
			}
		}
	}
	for _, f := range s.Flows {
		if f.Stack == scenario.StackKernel {
			continue // from the kernel to the peer host, see setupTUN
		}
		if s.WiFi == nil && l.find(l.clients, f.SACK) == nil {
			if _, err := l.addHost(s, clk, log, false, f.SACK, -1, ""); err != nil {
				return fail(err)
			}
		}
		if l.find(l.servers, f.SACK) == nil {
			if _, err := l.addHost(s, clk, log, true, f.SACK, -1, ""); err != nil {
				return fail(err)
			}
		}
	}
	// The device comes last: once it is up, the kernel may send.
	if s.TUN != nil {
		if err := l.setupTUN(s, log, hooks, tunStations); err != nil {
			return fail(err)
		}
	}
	return l, nil
}

// addHost makes the next host of a side.
func (l *lab) addHost(s *scenario.Scenario, clk clock.Clock, log *zap.Logger, server, sack bool, station int, name string) (*endHost, error) {
	side, owner := &l.clients, l.client
	if server {
		side, owner = &l.servers, l.server
	}
	i := len(*side)
	if i == maxHosts {
		return nil, fmt.Errorf("more than %d hosts on a side", maxHosts)
	}
	if name == "" {
		name = fmt.Sprintf("client%d", i)
		if server {
			name = fmt.Sprintf("server%d", i)
		}
	}
	addrs := hostAddrs(i, server)
	// Without segmentation offload: measured, a lab host's TCP sending
	// 64 KiB segments (split on its goroutine) cost as much CPU per
	// transfer as sending MTU-sized ones.
	out := l.output(l.path.Up, l.capClient)
	switch {
	case server:
		out = l.output(l.path.Down, l.capServer)
	case station >= 0:
		out = l.toCell(station)
	}
	seed := s.Seed + 2*uint64(i)
	if server {
		seed++
	}
	h, err := stack.NewHost(stack.HostConfig{
		Name: name, Addrs: addrs, MTU: s.MTU, Clock: clk, Seed: seed, SACK: sack, Output: out, Log: log,
		Transparent: server && l.transparent,
	})
	if err != nil {
		return nil, err
	}
	// A large segment that crossed a delay-only direction whole reaches
	// the host as its segments, all at once, as they would have: gVisor
	// acknowledges per packet it takes, and one ACK for a whole segment
	// halves a sender's ACK clock (see the README on GRO).
	inject := injector(h)
	e := &endHost{host: h, in: newInbox(func(p *impair.Packet) { l.pool.Split(p, inject) }), v4: addrs[0].Addr(), sack: sack, station: station}
	*side = append(*side, e)
	for _, a := range addrs {
		owner[a.Addr()] = e
	}
	return e, nil
}

// injector returns an inbox's delivery into h. A GSO packet (a large TCP
// segment that crossed the path whole) goes in whole, gVisor taking
// segments of any size, once its checksum is complete.
func injector(h *stack.Host) func(p *impair.Packet) {
	return func(p *impair.Packet) {
		p.FinishChecksum() // gVisor checks it
		h.Inject(p.Data)
		p.Release()
	}
}

// find returns the wired host of a side with the SACK setting, or nil.
func (l *lab) find(side []*endHost, sack bool) *endHost {
	for _, e := range side {
		if e.sack == sack && e.station < 0 {
			return e
		}
	}
	return nil
}

// ends returns the client-side and server-side hosts of flow f.
func (l *lab) ends(s *scenario.Scenario, f scenario.Flow) (client, server *endHost) {
	server = l.find(l.servers, f.SACK)
	if f.Station != "" {
		return l.clients[s.WiFi.Station(f.Station)], server
	}
	return l.find(l.clients, f.SACK), server
}

// copyOut copies a packet a host sends into a pooled packet; nil when it
// does not fit (counted).
func (l *lab) copyOut(slices [][]byte, g netif.GSO) *impair.Packet {
	n := 0
	for _, s := range slices {
		n += len(s)
	}
	pool := l.pool
	if n > pool.Size() && g.MSS > 0 {
		pool = l.bigPool
	}
	if n > pool.Size() {
		l.tooLarge.Add(1)
		return nil
	}
	p := pool.Get(n)
	off := 0
	for _, s := range slices {
		off += copy(p.Data[off:], s)
	}
	completeChecksum(p, g)
	return p
}

// completeChecksum settles the checksum of p, which came with g: a large
// TCP segment becomes a GSO packet (completed or split later); a TCP
// segment whose checksum may be partial has it computed; any other
// partial checksum (UDP, from a TUN device) is completed.
func completeChecksum(p *impair.Packet, g netif.GSO) {
	switch {
	case g.MSS > 0 && p.SetGSO(g.MSS, g.NeedsCsum):
	case !g.NeedsCsum:
	case impair.CompleteChecksum(p.Data):
	default:
		impair.CompletePartial(p.Data, g.CsumStart, g.CsumOffset)
	}
}

// output returns a wired host's Output: into the direction r, captured
// on the way when cw is not nil.
func (l *lab) output(r *impair.Runner, cw *capture.Writer) func([][]byte) {
	out := l.outputGSO(r, cw)
	return func(slices [][]byte) { out(slices, netif.GSO{}) }
}

// outputGSO returns a wired host's OutputGSO: into the direction r,
// where a large segment crosses whole when it may (see whole) or is split
// here, on the sender's goroutine; captured on the way, segment by
// segment, when cw is not nil.
func (l *lab) outputGSO(r *impair.Runner, cw *capture.Writer) func([][]byte, netif.GSO) {
	send := func(p *impair.Packet) { r.Send(p) }
	captured := func(p *impair.Packet) {
		l.capture(cw, l.clk.Now(), p)
		r.Send(p)
	}
	return func(slices [][]byte, g netif.GSO) {
		p := l.copyOut(slices, g)
		if p == nil {
			return
		}
		if cw != nil {
			l.pool.Split(p, captured)
			return
		}
		if p.Segments() > 1 && !l.whole(r) {
			l.pool.Split(p, send)
			return
		}
		r.Send(p)
	}
}

// whole reports whether large segments cross the direction r whole: when
// it allows (Runner.KeepsSegments) and no capture is on, since a capture
// shows the packets on the wire.
func (l *lab) whole(r *impair.Runner) bool {
	return r.KeepsSegments() && l.capClient == nil && l.capServer == nil
}

// capture writes p to cw as it is on the wire: with its final checksum.
func (l *lab) capture(cw *capture.Writer, now time.Time, p *impair.Packet) {
	p.FinishChecksum()
	clock.Hold(l.clk)           // the write may block in a system call
	cw.WritePacket(now, p.Data) // a full capture counts what it skips
	clock.Release(l.clk)
}

// toCell returns a station host's Output: onto the Wi-Fi medium.
func (l *lab) toCell(station int) func([][]byte) {
	return func(slices [][]byte) {
		if p := l.copyOut(slices, netif.GSO{}); p != nil {
			if l.capClient != nil {
				l.capture(l.capClient, l.clk.Now(), p)
			}
			l.cell.Send(p, station, false)
		}
	}
}

// fromCell returns what receives the frames the medium delivers: uplink
// frames reached the AP and go on into the uplink; downlink frames reached
// their station.
func (l *lab) fromCell(uplink bool) func(time.Time, *impair.Packet, int) {
	if uplink {
		return func(_ time.Time, p *impair.Packet, _ int) { l.path.Up.Send(p) }
	}
	return func(now time.Time, p *impair.Packet, station int) {
		if l.capClient != nil {
			l.capture(l.capClient, now, p)
		}
		l.clients[station].in.put(p)
	}
}

// deliver returns the function receiving what leaves a direction: the
// uplink delivers to the server side, the downlink to the client side. It
// hands each packet to the host that owns its destination, or, for a Wi-Fi
// station, to the AP's queue for it; a packet reaching a host is captured
// at that side's point.
func (l *lab) deliver(toServer bool) func(time.Time, *impair.Packet) {
	return func(now time.Time, p *impair.Packet) {
		owner, cw := l.client, l.capClient
		if toServer {
			owner, cw = l.server, l.capServer
		}
		e := owner[dstAddr(p.Data)]
		if e == nil && toServer && l.tun != nil && l.tun.cfg.Transparent != nil {
			e = l.tun.peer // its relay takes any destination (and refuses what is not allowed)
		}
		if e == nil && toServer {
			e = l.catchAll
		}
		switch {
		case e == nil:
			l.noRoute.Add(1)
			p.Release()
		case e.station >= 0:
			l.cell.Send(p, e.station, true)
		default:
			if cw != nil {
				l.capture(cw, now, p)
			}
			e.in.put(p)
		}
	}
}

// dstAddr returns the destination address of an IPv4 or IPv6 packet, or the
// zero Addr for anything else.
func dstAddr(b []byte) netip.Addr {
	if len(b) == 0 {
		return netip.Addr{}
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) >= 20 {
			return netip.AddrFrom4([4]byte(b[16:20]))
		}
	case 6:
		if len(b) >= 40 {
			return netip.AddrFrom16([16]byte(b[24:40]))
		}
	}
	return netip.Addr{}
}

func (l *lab) start(ctx context.Context) {
	l.path.start(ctx)
	if l.cell != nil {
		l.cell.Start(ctx)
	}
	if l.tun != nil {
		l.startTUN()
	}
}

// deliveryDrops returns the packets that were dropped because the host
// they were for fell behind, on the server side (what the uplink
// delivered) or the client side.
func (l *lab) deliveryDrops(serverSide bool) uint64 {
	side := l.clients
	if serverSide {
		side = l.servers
	}
	var n uint64
	for _, e := range side {
		n += e.in.full.Load()
	}
	return n
}

// close stops the packet sources in the path first (the TUN device and its
// read loop, the cell, then the directions), so that nothing is delivered
// into a host being closed, then the inboxes, then the hosts (and with
// them every endpoint they made), then the relay, which waits for its
// goroutines. Safe to call more than once.
func (l *lab) close() {
	if err := l.stopTUN(); err != nil {
		l.log.Error("closing the TUN device", zap.Error(err))
	}
	if l.cell != nil {
		l.cell.Close()
	}
	if l.path != nil {
		l.path.close()
	}
	for _, e := range append(l.clients, l.servers...) {
		e.in.close()
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
	for _, cw := range []*capture.Writer{l.capClient, l.capServer} {
		if cw != nil {
			cw.Close()
		}
	}
}

// openCaptures opens the pcap writers the scenario asks for in dir:
// <point>.pcap, or <point>-<variant>.pcap.
func (l *lab) openCaptures(s *scenario.Scenario, dir string) error {
	if s.Capture == nil || len(s.Capture.Points) == 0 {
		return nil
	}
	if dir == "" {
		return errors.New("capture needs an output folder")
	}
	o := s.Capture.Options
	for _, pt := range s.Capture.Points {
		name := pt
		if s.Variant != "" {
			name += "-" + s.Variant
		}
		w, err := capture.Open(filepath.Join(dir, name+".pcap"), o)
		if err != nil {
			return err
		}
		if pt == "client" {
			l.capClient = w
		} else {
			l.capServer = w
		}
	}
	return nil
}

// captureStats returns the capture counters by point.
func (l *lab) captureStats() map[string]CaptureSummary {
	m := map[string]CaptureSummary{}
	for name, cw := range map[string]*capture.Writer{"client": l.capClient, "server": l.capServer} {
		if cw != nil {
			st := cw.Stats()
			m[name] = CaptureSummary{Packets: st.Packets, Truncated: st.Truncated, Files: st.Files, NotWritten: st.NotWritten, Full: st.Full}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// setupTimeout bounds connection setup of one flow: a SYN lost on a lossy
// path costs gVisor's initial RTO of 1 s, and several in a row are possible.
const setupTimeout = 30 * time.Second

// newFlow connects flow number i of s across the lab and returns it ready
// to run. conns are the connections the caller closes after the run.
func (l *lab) newFlow(ctx context.Context, s *scenario.Scenario, i int, f scenario.Flow, clk clock.Clock) (flows.Flow, []closer, error) {
	// A flow sends until its own duration or the run's end, whichever
	// comes first. (A flow bounded by size or count instead is cut by the
	// run's deadline.)
	if end := s.Duration - f.Start; f.Duration > end {
		f.Duration = end
	}
	port := flowPort(s, i)
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if f.Stack == scenario.StackKernel {
		return l.newKernelFlow(ctx, i, f, port, clk)
	}
	client, server := l.ends(s, f)
	from, to := client.host, server.host
	toAddr := server.v4
	if f.Direction == "down" {
		from, to = to, from
		toAddr = client.v4
	}
	dst := netip.AddrPortFrom(toAddr, port)
	switch f.Type {
	case "tcp":
		o := stack.TCPOptions{CC: f.CC, SendBuffer: int(f.SendBuffer), ReceiveBuffer: int(f.ReceiveBuffer)}
		ln, err := to.ListenTCP(port, o)
		if err != nil {
			return nil, nil, err
		}
		return newTCPFlow(ctx, f, clk, ln, l.warnStall(f.Name), func() (net.Conn, func() netif.TCPInfo, error) {
			c, err := from.DialTCP(ctx, dst, o)
			if err != nil {
				return nil, nil, err
			}
			return c, c.Info, nil
		})
	default: // udp
		recv, err := to.ListenUDP(port)
		if err != nil {
			return nil, nil, err
		}
		send, err := from.DialUDP(dst)
		if err != nil {
			recv.Close()
			return nil, nil, err
		}
		return newUDPFlow(i, f, clk, send, recv)
	}
}

// newUDPFlow makes flow number i, f, of its connected ends; on error it
// closes them.
func newUDPFlow(i int, f scenario.Flow, clk clock.Clock, send net.Conn, recv net.PacketConn) (flows.Flow, []closer, error) {
	fl, err := flows.NewUDP(flows.UDPSpec{Name: f.Name, FlowID: uint32(i + 1), Rate: f.Rate, Interval: f.Interval,
		PacketSize: f.PacketSize, Count: f.Count, Duration: f.Duration, Start: f.Start}, clk, send, recv)
	if err != nil {
		send.Close()
		recv.Close()
		return nil, nil, err
	}
	return fl, []closer{send, recv}, nil
}

type closer interface{ Close() error }

// newTCPFlow connects a TCP bulk flow: dial connects its sender while ln
// (closed on return) accepts its receiver. dial returns the sender and
// how to read its TCP state.
func newTCPFlow(ctx context.Context, f scenario.Flow, clk clock.Clock, ln *stack.TCPListener, onStall func(flows.Stall),
	dial func() (net.Conn, func() netif.TCPInfo, error)) (flows.Flow, []closer, error) {
	defer ln.Close()
	type accepted struct {
		c   *stack.TCPConn
		err error
	}
	ach := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept(ctx)
		ach <- accepted{c, err}
	}()
	// The handshake's time, lost SYNs included: on the path's clock, from
	// the dial (the first SYN) to the connection established.
	began := clk.Now()
	send, info, err := dial()
	connect := clk.Now().Sub(began)
	if err != nil {
		ln.Close()
		if a := <-ach; a.c != nil {
			a.c.Close()
		}
		return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
	}
	a := <-ach
	if a.err != nil {
		send.Close()
		return nil, nil, fmt.Errorf("flow %s: accept: %w", f.Name, a.err)
	}
	spec := flows.TCPBulkSpec{Name: f.Name, Size: f.Size, Duration: f.Duration, Start: f.Start, Connect: connect, OnStall: onStall}
	fl, err := flows.NewTCPBulk(spec, clk, send, a.c,
		func() flows.TCPInfo {
			in := info()
			return flows.TCPInfo{SRTT: in.SRTT, RTTVar: in.RTTVar, RTO: in.RTO, Cwnd: in.Cwnd, Ssthresh: in.Ssthresh,
				Retransmits: in.Retransmits, FastRetransmits: in.FastRetransmits, Timeouts: in.Timeouts,
				SegmentsSent: in.SegmentsSent}
		})
	if err != nil {
		send.Close()
		a.c.Close()
		return nil, nil, err
	}
	return fl, []closer{send, a.c}, nil
}

// warnStall returns the function that logs a stall of the named flow as
// it begins: the flow's figures are the sending stack's, not the path's,
// from then on (see flows.Stall).
func (l *lab) warnStall(flow string) func(flows.Stall) {
	return func(st flows.Stall) {
		l.log.Warn("tcp flow stalled: it has data to send and has sent nothing, not even a retransmission, for longer than max(1s, 3 RTO)",
			zap.String("flow", flow), zap.Duration("silent_since", st.At), zap.Duration("rto", st.Info.RTO),
			zap.Uint32("cwnd", st.Info.Cwnd), zap.Uint32("ssthresh", st.Info.Ssthresh), zap.Uint64("timeouts", st.Info.Timeouts))
	}
}

// flowPort returns the port of flow number i: 5001 + i, or the next one
// up that the TUN's forwards and services leave free on the peer.
func flowPort(s *scenario.Scenario, i int) uint16 {
	taken := map[uint16]bool{}
	if s.TUN != nil {
		for _, f := range s.TUN.Forward {
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

// connectFlows connects every flow at once and returns them with the
// connections to close after the run. On error, the flows that did
// connect are returned too, so that the caller closes their connections.
func (l *lab) connectFlows(ctx context.Context, s *scenario.Scenario, clk clock.Clock) ([]flows.Flow, []closer, error) {
	fls := make([]flows.Flow, len(s.Flows))
	conns := make([][]closer, len(s.Flows))
	errs := make([]error, len(s.Flows))
	var wg sync.WaitGroup
	for i, f := range s.Flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fls[i], conns[i], errs[i] = l.newFlow(ctx, s, i, f, clk)
		}()
	}
	wg.Wait()
	var all []closer
	for _, c := range conns {
		all = append(all, c...)
	}
	return fls, all, errors.Join(errs...)
}
