package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
)

// A lab is the rootless topology of one run: gVisor hosts on the client
// side and on the server side of the emulated path.
//
// Packets a client-side host sends enter the uplink; what leaves the
// uplink is handed to the server-side host that owns its destination
// address, and the other way round for the downlink. Flows that need
// different stack-wide settings (gVisor switches SACK per stack, not per
// socket) get a host pair of their own; all other flows share pair 0.
//
// Addresses: pair i has client 10.0.0.(1+i) and fd00::(1+i), server
// 10.0.0.(101+i) and fd00::(101+i)... written as 10.0.0.0/24 and
// fd00::/64 prefixes, so up to 100 pairs.
type lab struct {
	path  *Path
	pool  *impair.Pool
	pairs []*hostPair
	// client and server map an address to its host's inbox, for delivery
	// at the far end of each direction; written before the path starts,
	// then only read.
	client, server map[netip.Addr]*inbox
	inboxes        []*inbox

	noRoute  atomic.Uint64 // packets whose destination no host owns
	tooLarge atomic.Uint64 // packets larger than the pool's buffers (never with a sane MTU)
}

// inbox hands the packets leaving a direction to one host on a goroutine
// of its own, so that the direction's scheduler never waits for gVisor to
// process a packet: at high rates the two then share the machine's cores
// instead of taking turns on one.
type inbox struct {
	h    *stack.Host
	ch   chan *impair.Packet
	full atomic.Uint64 // packets dropped because the host fell behind
	done chan struct{}
}

// inboxLen bounds the packets waiting for a host: about 1 ms at 10 Gbit/s
// of 1500-byte packets; a host that far behind is overloaded, and the drop
// is counted.
const inboxLen = 1024

func newInbox(h *stack.Host) *inbox {
	b := &inbox{h: h, ch: make(chan *impair.Packet, inboxLen), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for p := range b.ch {
			b.h.Inject(p.Data)
			p.Release()
		}
	}()
	return b
}

// put hands p over without blocking.
func (b *inbox) put(p *impair.Packet) {
	select {
	case b.ch <- p:
	default:
		b.full.Add(1)
		p.Release()
	}
}

// close stops the inbox once its queue is drained. Nothing may put after.
func (b *inbox) close() {
	close(b.ch)
	<-b.done
}

// hostPair is one client-side and one server-side host.
type hostPair struct {
	sack           bool
	client, server *stack.Host
}

const maxPairs = 100

func pairAddrs(i int, server bool) []netip.Prefix {
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

// newLab builds the path and the hosts the flows of s need. Nothing runs
// until start; close releases everything, also after a failed newLab.
func newLab(s *scenario.Scenario, clk clock.Clock, log *zap.Logger) (*lab, error) {
	l := &lab{
		pool:   impair.NewPool(s.MTU),
		client: map[netip.Addr]*inbox{},
		server: map[netip.Addr]*inbox{},
	}
	var err error
	l.path, err = newPath(s, clk, l.deliver(l.server), l.deliver(l.client))
	if err != nil {
		return nil, err
	}
	for _, f := range s.Flows {
		if l.pairFor(f) != nil {
			continue
		}
		if len(l.pairs) == maxPairs {
			l.close()
			return nil, fmt.Errorf("more than %d host pairs", maxPairs)
		}
		i := len(l.pairs)
		p := &hostPair{sack: f.SACK}
		for _, side := range []struct {
			server bool
			host   **stack.Host
			to     *impair.Runner
			owner  map[netip.Addr]*inbox
		}{{false, &p.client, l.path.Up, l.client}, {true, &p.server, l.path.Down, l.server}} {
			name := fmt.Sprintf("client%d", i)
			if side.server {
				name = fmt.Sprintf("server%d", i)
			}
			addrs := pairAddrs(i, side.server)
			h, err := stack.NewHost(stack.HostConfig{
				Name:   name,
				Addrs:  addrs,
				MTU:    s.MTU,
				Clock:  clk,
				Seed:   s.Seed + uint64(2*i) + boolU64(side.server),
				SACK:   f.SACK,
				Output: l.output(side.to),
				Log:    log,
			})
			if err != nil {
				l.close()
				return nil, err
			}
			*side.host = h
			in := newInbox(h)
			l.inboxes = append(l.inboxes, in)
			for _, a := range addrs {
				side.owner[a.Addr()] = in
			}
		}
		l.pairs = append(l.pairs, p)
	}
	return l, nil
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// pairFor returns the host pair flow f runs on, nil if none fits yet.
func (l *lab) pairFor(f scenario.Flow) *hostPair {
	for _, p := range l.pairs {
		if p.sack == f.SACK {
			return p
		}
	}
	return nil
}

// output returns a host's Output: each packet is copied into a pooled
// packet and sent into the direction r.
func (l *lab) output(r *impair.Runner) func([][]byte) {
	return func(slices [][]byte) {
		n := 0
		for _, s := range slices {
			n += len(s)
		}
		if n > l.pool.Size() {
			l.tooLarge.Add(1)
			return
		}
		p := l.pool.Get(n)
		off := 0
		for _, s := range slices {
			off += copy(p.Data[off:], s)
		}
		r.Send(p)
	}
}

// deliver returns the function receiving what leaves a direction: it
// hands each packet to the host of the far side that owns its
// destination.
func (l *lab) deliver(owner map[netip.Addr]*inbox) func(time.Time, *impair.Packet) {
	return func(_ time.Time, p *impair.Packet) {
		if in := owner[dstAddr(p.Data)]; in != nil {
			in.put(p)
			return
		}
		l.noRoute.Add(1)
		p.Release()
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

func (l *lab) start(ctx context.Context) { l.path.start(ctx) }

// deliveryDrops returns the packets that left a direction but were dropped
// because the host they were for fell behind: for the uplink (server
// side) or the downlink (client side).
func (l *lab) deliveryDrops(serverSide bool) uint64 {
	owner := l.client
	if serverSide {
		owner = l.server
	}
	seen := map[*inbox]bool{}
	var n uint64
	for _, in := range owner {
		if !seen[in] {
			seen[in] = true
			n += in.full.Load()
		}
	}
	return n
}

// close stops the path first, so that nothing is delivered into a host
// being closed, then the inboxes, then closes the hosts (and with them every
// endpoint they made). Safe to call more than once.
func (l *lab) close() {
	l.path.close()
	for _, in := range l.inboxes {
		in.close()
	}
	l.inboxes = nil
	for _, p := range l.pairs {
		for _, h := range []*stack.Host{p.client, p.server} {
			if h != nil {
				h.Close()
			}
		}
	}
}

// setupTimeout bounds connection setup of one flow: a SYN lost on a lossy
// path costs gVisor's initial RTO of 1 s, and several in a row are possible.
const setupTimeout = 30 * time.Second

// newFlow connects flow number i of s across the lab and returns it ready
// to run. conns are the connections the caller closes after the run.
func (l *lab) newFlow(ctx context.Context, s *scenario.Scenario, i int, f scenario.Flow, clk clock.Clock) (flows.Flow, []closer, error) {
	p := l.pairFor(f)
	from, to := p.client, p.server
	toAddr := pairAddrs(indexOf(l.pairs, p), true)[0].Addr()
	if f.Direction == "down" {
		from, to = to, from
		toAddr = pairAddrs(indexOf(l.pairs, p), false)[0].Addr()
	}
	// A flow sends until its own duration or the run's end, whichever
	// comes first. (A flow bounded by size or count instead is cut by the
	// run's deadline.)
	if end := s.Duration - f.Start; f.Duration > end {
		f.Duration = end
	}
	port := uint16(5001 + i)
	dst := netip.AddrPortFrom(toAddr, port)
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	switch f.Type {
	case "tcp":
		o := stack.TCPOptions{CC: f.CC, SendBuffer: int(f.SendBuffer), ReceiveBuffer: int(f.ReceiveBuffer)}
		ln, err := to.ListenTCP(port, o)
		if err != nil {
			return nil, nil, err
		}
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
		send, err := from.DialTCP(ctx, dst, o)
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
		info := func() flows.TCPInfo {
			in := send.Info()
			return flows.TCPInfo{SRTT: in.SRTT, RTTVar: in.RTTVar, RTO: in.RTO, Cwnd: in.Cwnd, Ssthresh: in.Ssthresh,
				Retransmits: in.Retransmits, FastRetransmits: in.FastRetransmits, Timeouts: in.Timeouts}
		}
		fl, err := flows.NewTCPBulk(flows.TCPBulkSpec{Name: f.Name, Size: f.Size, Duration: f.Duration, Start: f.Start}, clk, send, a.c, info)
		if err != nil {
			send.Close()
			a.c.Close()
			return nil, nil, err
		}
		return fl, []closer{send, a.c}, nil
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

type closer interface{ Close() error }

func indexOf(ps []*hostPair, p *hostPair) int {
	for i, q := range ps {
		if q == p {
			return i
		}
	}
	return -1
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
