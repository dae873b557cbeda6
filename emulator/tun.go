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
	"github.com/netjam/netjam/impair"
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

// device is the TUN device as the lab uses it; *stack.TUN outside tests.
type device interface {
	Read(buf []byte) (int, error)
	Write(pkt []byte) (int, error)
	Name() string
	Close() error
}

// openDevice opens the TUN device; tests replace it with an in-memory one.
type openDevice func(cfg stack.TUNConfig) (device, error)

// labHooks are what tests replace in a lab: how the device is opened and
// how the relay dials.
type labHooks struct {
	open openDevice
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

func openTUN(cfg stack.TUNConfig) (device, error) {
	t, err := stack.OpenTUN(cfg)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// tunEnd is TUN mode's part of a lab.
type tunEnd struct {
	cfg    *scenario.TUN
	dev    device
	ns     *stack.Netns // the device's namespace; nil: netjam's own
	kernel *endHost     // the client-side endpoint: writes into dev
	peer   *endHost     // the server-side host owning the peer addresses
	relay  *stack.Relay
	// kernelAddr and peerAddr are the addresses kernel flows use: IPv4
	// when the device has IPv4.
	kernelAddr, peerAddr netip.Addr

	readDone chan struct{} // closed when the read loop ends; nil before start

	malformed   atomic.Uint64 // packets from the device that are not IPv4 or IPv6
	writeErrors atomic.Uint64 // packets the device refused
}

// setupTUN builds TUN mode for s: the peer host and its relay, then the
// device, then the kernel's endpoint (as Wi-Fi station station when it is
// not -1). The read loop starts with the lab.
func (l *lab) setupTUN(s *scenario.Scenario, log *zap.Logger, hooks labHooks, station int) error {
	c := s.TUN
	t := &tunEnd{cfg: c}
	l.tun = t
	var peerAddrs []netip.Prefix
	for _, a := range c.Address {
		for _, p := range c.Peer {
			if p.Is4() == a.Addr().Is4() {
				peerAddrs = append(peerAddrs, netip.PrefixFrom(p, a.Bits()))
			}
		}
	}
	t.kernelAddr, t.peerAddr = c.Address[0].Addr(), peerAddrs[0].Addr()
	mtu := c.MTU
	if mtu == 0 {
		mtu = s.MTU
	}
	h, err := stack.NewHost(stack.HostConfig{
		Name: "peer", Addrs: peerAddrs, MTU: mtu, Clock: l.clk, Seed: s.Seed + 2*maxHosts + 1, SACK: true,
		Transparent: c.Transparent != nil, Output: l.output(l.path.Down, l.capServer), Log: log,
	})
	if err != nil {
		return err
	}
	t.peer = &endHost{host: h, in: newInbox(h.Inject), v4: t.peerAddr, sack: true, station: -1}
	l.servers = append(l.servers, t.peer)
	for _, a := range peerAddrs {
		l.server[a.Addr()] = t.peer
	}

	rc := stack.RelayConfig{Services: c.Services, UDPIdle: c.UDPIdle, Dial: hooks.dial, Log: log}
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
		if t.ns, err = stack.OpenNetns(c.Netns); err != nil {
			return err
		}
	}
	t.dev, err = hooks.open(stack.TUNConfig{Name: c.Name, Addrs: c.Address, MTU: mtu, Routes: c.Routes, Netns: t.ns.Path()})
	if err != nil {
		return err
	}
	dev := t.dev
	t.kernel = &endHost{v4: t.kernelAddr, sack: true, station: station, in: newInbox(func(b []byte) {
		if _, err := dev.Write(b); err != nil {
			t.writeErrors.Add(1)
		}
	})}
	if station >= 0 {
		// Station i is client i (see newLab).
		l.clients = append(l.clients[:station], append([]*endHost{t.kernel}, l.clients[station:]...)...)
	} else {
		l.clients = append(l.clients, t.kernel)
	}
	for _, a := range c.Address {
		l.client[a.Addr()] = t.kernel
	}
	log.Info("TUN device", zap.String("device", dev.Name()), zap.Stringers("kernel", c.Address),
		zap.Stringers("peer", peerAddrs), zap.Int("mtu", mtu), zap.String("netns", c.Netns))
	return nil
}

// startTUN starts the device's read loop.
func (l *lab) startTUN() {
	t := l.tun
	t.readDone = make(chan struct{})
	go func() {
		defer close(t.readDone)
		for {
			p := l.pool.Get(l.pool.Size())
			n, err := t.dev.Read(p.Data)
			if err != nil {
				p.Release()
				return
			}
			p.Data = p.Data[:n]
			l.fromKernel(p)
		}
	}()
}

// fromKernel puts a packet the kernel sent into the path: onto the medium
// when the device is a Wi-Fi station, into the uplink otherwise. What is
// not a well-formed IPv4 or IPv6 packet is dropped and counted.
func (l *lab) fromKernel(p *impair.Packet) {
	t := l.tun
	if !wellFormed(p.Data) {
		t.malformed.Add(1)
		p.Release()
		return
	}
	if l.capClient != nil {
		l.capClient.WritePacket(l.clk.Now(), p.Data)
	}
	if t.kernel.station >= 0 {
		l.cell.Send(p, t.kernel.station, false)
		return
	}
	l.path.Up.Send(p)
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
	// Malformed counts what the device delivered that was not an IPv4
	// or IPv6 packet; WriteErrors what it refused to take.
	Malformed   uint64           `json:"malformed"`
	WriteErrors uint64           `json:"write_errors"`
	Relay       stack.RelayStats `json:"relay"`
	Forwards    []string         `json:"forwards,omitempty"`
}

func (l *lab) tunSummary() *TUNSummary {
	t := l.tun
	if t == nil || t.dev == nil {
		return nil
	}
	ts := &TUNSummary{Device: t.dev.Name(), Malformed: t.malformed.Load(), WriteErrors: t.writeErrors.Load()}
	for _, a := range t.cfg.Address {
		ts.Kernel = append(ts.Kernel, a.String())
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
func IsPrivilege(err error) bool { return errors.Is(err, stack.ErrPrivilege) }

// privilegeReason is the first line of a privilege error, for a skipped
// run's row.
func privilegeReason(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, " Either:")
}

// newKernelFlow connects a flow of the kernel across the path: the
// kernel's socket (in the device's namespace) on the client side, a
// socket of the peer host on the server side. A TCP flow sends from the
// kernel, so that its congestion control is the kernel's; a UDP flow
// sends either way.
func (l *lab) newKernelFlow(ctx context.Context, i int, f scenario.Flow, port uint16, clk clock.Clock) (flows.Flow, []closer, error) {
	t := l.tun
	peer := t.peer.host
	switch {
	case f.Type == "tcp" && f.Direction == "down":
		return nil, nil, fmt.Errorf("flow %s: a kernel TCP flow sends from the kernel: direction up only", f.Name)
	case f.Type == "tcp":
		ln, err := peer.ListenTCP(port, stack.TCPOptions{SendBuffer: int(f.SendBuffer), ReceiveBuffer: int(f.ReceiveBuffer)})
		if err != nil {
			return nil, nil, err
		}
		return newTCPFlow(ctx, f, clk, ln, func() (net.Conn, func() stack.TCPInfo, error) {
			var c *stack.KernelTCPConn
			err := t.ns.Do(func() error {
				var err error
				c, err = stack.DialKernelTCP(ctx, netip.AddrPortFrom(t.peerAddr, port),
					stack.KernelTCPOptions{CC: f.CC, SendBuffer: int(f.SendBuffer), ReceiveBuffer: int(f.ReceiveBuffer)})
				return err
			})
			if err != nil {
				return nil, nil, err
			}
			return c, c.Info, nil
		})
	default: // udp
		var send net.Conn
		var recv net.PacketConn
		var err error
		if f.Direction == "down" {
			err = t.ns.Do(func() error {
				recv, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(t.kernelAddr, port)))
				return err
			})
			if err == nil {
				if send, err = peer.DialUDP(netip.AddrPortFrom(t.kernelAddr, port)); err != nil {
					recv.Close()
				}
			}
		} else {
			if recv, err = peer.ListenUDP(port); err == nil {
				err = t.ns.Do(func() error {
					send, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(t.peerAddr, port)))
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
		fl, err := flows.NewUDP(flows.UDPSpec{Name: f.Name, FlowID: uint32(i + 1), Rate: f.Rate, Interval: f.Interval,
			PacketSize: f.PacketSize, Count: f.Count, Duration: f.Duration, Start: f.Start}, clk, send, recv)
		if err != nil {
			send.Close()
			recv.Close()
			return nil, nil, err
		}
		return fl, []closer{send, recv}, nil
	}
}
