package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
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
	dial func(ctx context.Context, network, address string) (net.Conn, error)
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
	dev hostnet.Device
	ns  *hostnet.Netns // the device's namespace; nil: netjam's own
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
	// peerAddr is the peer address kernel flows use (IPv4 when the
	// device has IPv4), kernelAddrs each endpoint's address in its
	// family.
	peerAddr    netip.Addr
	kernelAddrs []netip.Addr

	readDone chan struct{} // closed when the read loop ends; nil before start

	malformed   atomic.Uint64 // packets from the device that are not IPv4 or IPv6
	writeErrors atomic.Uint64 // packets the device refused
	kernelDrops uint64        // the device's drops, read when it closes
}

// setupTUN builds TUN mode for s: the peer host and its relay, then the
// device, then the kernel's endpoints: one per station of s.TUN.Stations
// (stations lists their indexes in the cell, ascending), or one wired
// endpoint when there are none. The read loop starts with the lab.
func (l *lab) setupTUN(s *scenario.Scenario, log *zap.Logger, hooks labHooks, stations []int) error {
	c := s.TUN
	t := &tunEnd{cfg: c, fromStation: map[netip.Addr]*endHost{}}
	l.tun = t
	var peerAddrs []netip.Prefix
	for _, a := range c.Address {
		for _, p := range c.Peer {
			if p.Is4() == a.Addr().Is4() {
				peerAddrs = append(peerAddrs, netip.PrefixFrom(p, a.Bits()))
			}
		}
	}
	t.peerAddr = peerAddrs[0].Addr()
	mtu := c.MTU
	if mtu == 0 {
		mtu = s.MTU
	}
	h, err := stack.NewHost(stack.HostConfig{
		Name: "peer", Addrs: peerAddrs, MTU: mtu, Clock: l.clk, Seed: s.Seed + 2*maxHosts + 1, SACK: true,
		Transparent: c.Transparent != nil, OutputGSO: l.outputGSO(l.path.Down, l.capServer), Log: log,
	})
	if err != nil {
		return err
	}
	// The peer takes what left the uplink together coalesced (GRO), as a
	// NIC hands the kernel's TCP its segments: the senders are the
	// kernel's, whose loss detection counts bytes, not ACKs.
	inject := injector(h)
	t.peer = &endHost{host: h, v4: t.peerAddr, sack: true, station: -1, in: newBatchInbox(func(ps []*impair.Packet) {
		for _, p := range l.bigPool.Coalesce(ps) {
			inject(p)
		}
	})}
	l.servers = append(l.servers, t.peer)
	for _, a := range peerAddrs {
		l.server[a.Addr()] = t.peer
	}

	rc := stack.RelayConfig{Services: c.Services, UDPIdle: c.UDPIdle, TCPIdle: c.TCPIdle, Dial: hooks.dial, Log: log}
	for _, f := range c.Forward {
		rc.Forwards = append(rc.Forwards, stack.Forward{Proto: f.Proto, Listen: f.Listen, To: f.To})
	}
	if c.Transparent != nil {
		rc.Transparent, rc.Allow = true, c.Transparent.Allow
	}
	if t.relay, err = h.StartRelay(context.Background(), rc); err != nil {
		return err
	}

	if c.Netns != "" {
		if t.ns, err = hostnet.OpenNetns(c.Netns); err != nil {
			return err
		}
	}
	// The device has the kernel's addresses, and one more per further
	// station, in the same networks.
	addrs := append([]netip.Prefix(nil), c.Address...)
	for _, sa := range c.StationAddrs[min(1, len(c.StationAddrs)):] {
		for i, a := range sa {
			addrs = append(addrs, netip.PrefixFrom(a, c.Address[i].Bits()))
		}
	}
	t.dev, err = hooks.open(hostnet.TUNConfig{Name: c.Name, Addrs: addrs, MTU: mtu, Routes: c.Routes, HostRoutes: c.HostRoutes, Netns: t.ns.Path(), Offload: c.Offload})
	if err != nil {
		return err
	}
	dev := t.dev
	vec := make([][]byte, 1) // the inbox's goroutine's own: no allocation per packet
	write := func(p *impair.Packet) {
		var g netif.GSO
		switch mss, _, ok := p.GSO(); {
		case ok:
			// A large segment (that crossed the path whole, or
			// merged after it): the kernel takes it as its segments,
			// completing the checksum.
			impair.PseudoChecksum(p.Data)
			g = netif.GSO{MSS: mss, NeedsCsum: true}
		case p.Partial() && dev.Offload():
			impair.PseudoChecksum(p.Data)
			g = netif.GSO{NeedsCsum: true}
		default:
			p.FinishChecksum()
		}
		vec[0] = p.Data
		if _, err := dev.WritePacket(vec, g); err != nil {
			t.writeErrors.Add(1)
		}
		vec[0] = nil
		p.Release()
	}
	in := newBatchInbox(func(ps []*impair.Packet) {
		if dev.Offload() {
			// Segments of one connection that left the path together
			// go to the kernel as one, as a NIC's GRO would pass them.
			ps = l.bigPool.Coalesce(ps)
		}
		for _, p := range ps {
			if p.Segments() > 1 && !dev.Offload() {
				// A device without offload takes MTU-sized packets only.
				l.pool.Split(p, write)
				continue
			}
			write(p)
		}
	})
	if len(stations) == 0 {
		k := &endHost{v4: c.Address[0].Addr(), sack: true, station: -1, in: in, send: l.captured(func(p *impair.Packet) { l.path.Up.Send(p) })}
		t.kernels, t.kernelAddrs = []*endHost{k}, []netip.Addr{k.v4}
		for _, a := range c.Address {
			l.client[a.Addr()] = k
		}
	}
	for j, name := range c.Stations {
		st := s.WiFi.Station(name)
		k := &endHost{v4: c.StationAddrs[j][0], sack: true, station: st, in: in, send: l.captured(func(p *impair.Packet) { l.cell.Send(p, st, false) })}
		t.kernels, t.kernelAddrs = append(t.kernels, k), append(t.kernelAddrs, k.v4)
		for _, a := range c.StationAddrs[j] {
			l.client[a] = k
			t.fromStation[a] = k
		}
	}
	// Station i is client i (see newLab): the kernel's endpoints go in
	// where newLab left their stations out, in the cell's order.
	for _, st := range stations {
		for _, k := range t.kernels {
			if k.station == st {
				l.clients = append(l.clients[:st], append([]*endHost{k}, l.clients[st:]...)...)
			}
		}
	}
	if len(stations) == 0 {
		l.clients = append(l.clients, t.kernels[0])
	}
	log.Info("TUN device", zap.String("device", dev.Name()), zap.Stringers("kernel", addrs),
		zap.Stringers("peer", peerAddrs), zap.Int("mtu", mtu), zap.String("netns", c.Netns), zap.Strings("stations", c.Stations))
	return nil
}

// startTUN starts the device's read loop.
func (l *lab) startTUN() {
	t := l.tun
	t.readDone = make(chan struct{})
	go func() {
		defer close(t.readDone)
		// One read buffer, as large as a segment with offload can be;
		// each packet is then copied into a pooled packet of its size,
		// so that an ACK does not hold 64 KiB while it crosses the path.
		buf := make([]byte, maxGSOPacket)
		for {
			n, g, err := t.dev.ReadPacket(buf)
			if err != nil {
				return
			}
			l.fromKernel(buf[:n], g)
		}
	}()
}

// maxGSOPacket is the largest packet a device with offload hands over.
const maxGSOPacket = 65535

// fromKernel puts a packet the kernel sent into the path: onto the medium
// when the device is a Wi-Fi station, into the uplink otherwise. What is
// not a well-formed IPv4 or IPv6 packet is dropped and counted. A large
// TCP segment (offload) crosses the uplink whole when the uplink allows
// (impair.Config.KeepsSegments); otherwise it is split here, on the read
// loop's goroutine, into MTU-sized segments. The medium always takes
// segments, one frame each.
func (l *lab) fromKernel(b []byte, g netif.GSO) {
	t := l.tun
	if !wellFormed(b) {
		t.malformed.Add(1)
		return
	}
	var p *impair.Packet
	switch {
	case g.MSS > 0 && len(b) <= l.bigPool.Size():
		p = l.bigPool.Copy(b)
		completeChecksum(p, g)
	case len(b) <= l.pool.Size():
		p = l.pool.Copy(b)
		completeChecksum(p, g)
	default:
		l.tooLarge.Add(1)
		return
	}
	k := t.kernels[0]
	if len(t.kernels) > 1 {
		if e := t.fromStation[srcAddr(p.Data)]; e != nil {
			k = e
		}
	}
	if p.Segments() > 1 && (k.station >= 0 || !l.whole(l.path.Up)) {
		l.pool.Split(p, k.send)
		return
	}
	k.send(p)
}

// captured returns send, capturing each packet at the client's point
// first when that capture is on.
func (l *lab) captured(send func(*impair.Packet)) func(*impair.Packet) {
	cw := l.capClient
	if cw == nil {
		return send
	}
	return func(p *impair.Packet) {
		l.capture(cw, l.clk.Now(), p)
		send(p)
	}
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

// stopTUN closes the device, which ends the read loop, and waits for it.
// It runs before the path closes, so that the loop never sends into a
// closed direction.
func (l *lab) stopTUN() error {
	t := l.tun
	if t == nil || t.dev == nil {
		return nil
	}
	if n, ok := t.dev.Dropped(); ok {
		t.kernelDrops = n // the device goes with Close
	}
	err := t.dev.Close()
	if t.readDone != nil {
		<-t.readDone
	}
	return err
}

// TUNSummary is what TUN mode saw.
type TUNSummary struct {
	Device string   `json:"device"`
	Kernel []string `json:"kernel_addresses"`
	Peer   []string `json:"peer_addresses"`
	// Stations pairs each Wi-Fi station the kernel sits behind with its
	// addresses ("sta1 10.99.0.1").
	Stations []string `json:"stations,omitempty"`
	// Malformed counts what the device delivered that was not an IPv4
	// or IPv6 packet; WriteErrors what it refused to take.
	Malformed   uint64 `json:"malformed"`
	WriteErrors uint64 `json:"write_errors"`
	// KernelDrops counts the packets the kernel dropped at the device's
	// queue because netjam's read loop fell behind (tx_dropped; 0 when
	// it cannot be read, in a rootless shell).
	KernelDrops uint64           `json:"kernel_drops"`
	Relay       stack.RelayStats `json:"relay"`
	Forwards    []string         `json:"forwards,omitempty"`
}

func (l *lab) tunSummary() *TUNSummary {
	t := l.tun
	if t == nil || t.dev == nil {
		return nil
	}
	ts := &TUNSummary{Device: t.dev.Name(), Malformed: t.malformed.Load(), WriteErrors: t.writeErrors.Load(), KernelDrops: t.kernelDrops}
	for _, a := range t.cfg.Address {
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
	for _, f := range t.cfg.Forward {
		ts.Forwards = append(ts.Forwards, fmt.Sprintf("%s %s:%d -> %s", f.Proto, t.peerAddr, f.Listen, f.To))
	}
	if t.relay != nil {
		ts.Relay = t.relay.Stats()
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

// abortOnClose is a kernel flow's TCP connection, reset when the run
// closes it: the flow half-closed it already when done, and a graceful
// close would leave the kernel retransmitting its FIN (when the path lost
// the ACK) into the next run's device.
type abortOnClose struct{ *hostnet.KernelTCPConn }

func (c abortOnClose) Close() error { return c.Abort() }

// newKernelFlow connects a flow of the kernel across the path: the
// kernel's socket (in the device's namespace) on the client side, a
// socket of the peer host on the server side. A TCP flow sends from the
// kernel, so that its congestion control is the kernel's; a UDP flow
// sends either way.
func (l *lab) newKernelFlow(ctx context.Context, i int, f scenario.Flow, port uint16, clk clock.Clock) (flows.Flow, []closer, error) {
	t := l.tun
	peer := t.peer.host
	// The flow's kernel end sends from its station's address.
	local := t.kernelAddrs[max(0, t.cfg.Station(f.Station))]
	switch {
	case f.Type == "tcp" && f.Direction == "down":
		return nil, nil, fmt.Errorf("flow %s: a kernel TCP flow sends from the kernel: direction up only", f.Name)
	case f.Type == "tcp":
		ln, err := peer.ListenTCP(port, stack.TCPOptions{SendBuffer: int(f.SendBuffer), ReceiveBuffer: int(f.ReceiveBuffer)})
		if err != nil {
			return nil, nil, err
		}
		return newTCPFlow(ctx, f, clk, ln, l.warnStall(f.Name), func() (net.Conn, func() netif.TCPInfo, error) {
			var c *hostnet.KernelTCPConn
			err := t.ns.Do(func() error {
				var err error
				c, err = hostnet.DialKernelTCP(ctx, netip.AddrPortFrom(t.peerAddr, port),
					hostnet.KernelTCPOptions{CC: f.CC, SendBuffer: int(f.SendBuffer), ReceiveBuffer: int(f.ReceiveBuffer), Local: local})
				return err
			})
			if err != nil {
				return nil, nil, err
			}
			return abortOnClose{c}, c.Info, nil
		})
	default: // udp
		var send net.Conn
		var recv net.PacketConn
		var err error
		if f.Direction == "down" {
			err = t.ns.Do(func() error {
				recv, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, port)))
				return err
			})
			if err == nil {
				if send, err = peer.DialUDP(netip.AddrPortFrom(local, port)); err != nil {
					recv.Close()
				}
			}
		} else {
			if recv, err = peer.ListenUDP(port); err == nil {
				err = t.ns.Do(func() error {
					send, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)),
						net.UDPAddrFromAddrPort(netip.AddrPortFrom(t.peerAddr, port)))
					return err
				})
				if err != nil {
					recv.Close()
				}
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
		}
		return newUDPFlow(i, f, clk, send, recv)
	}
}
