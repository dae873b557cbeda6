package stack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/tcp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/udp"
	"go.uber.org/zap"

	"github.com/netjam/netjam/hostcfg"
)

// This file is netjam's end of TUN mode: a Host that owns the peer address
// terminates the TCP connections and UDP datagrams the kernel sends
// through the emulated path and relays them to real servers with host
// sockets, as tun2socks does.
//
// Every TCP connection and UDP session the Host does not have an endpoint
// for reaches the relay through gVisor's forwarders (tcp.Forwarder,
// udp.Forwarder), which decide by destination:
//
//   - a peer address and a port with a Forward: relayed to Forward.To;
//   - a peer address and port 7 or 9 with Services on: echo or discard;
//   - a peer address and any other port: refused as a closed port would
//     be (TCP reset, ICMP port unreachable), counted as NoService;
//   - a destination a host socket must never be dialled to (unspecified,
//     loopback, multicast, broadcast, link-local, IPv4-mapped; see
//     special): refused whatever Allow says, counted as Refused with its
//     reason. Only a Forward reaches the host's loopback;
//   - in transparent mode, any other destination in Allow: relayed to that
//     same destination;
//   - anything else: refused (TCP reset; UDP dropped without a word),
//     counted as Refused. The relay is never an open relay.
//
// Forwards and services are matched by destination, not by listening
// sockets bound to the unspecified address: in transparent mode the NIC is
// promiscuous, and such a socket would capture port 5201 of every
// destination.

// Relay terminates TCP and UDP on a Host and relays them to real servers.
// Its methods are safe for concurrent use.
//
// Goroutines: gVisor starts one per TCP connection request (the
// forwarder's), which the relay keeps for the client-to-target direction
// of the connection and pairs with one for the other direction; a UDP
// session has one goroutine per direction; each UDP service socket has
// one. All are counted in wg, and Close waits for them.
type Relay struct {
	h   *Host
	cfg hostcfg.RelayConfig
	log *zap.Logger

	peer      map[netip.Addr]bool // the host's own addresses
	broadcast map[netip.Addr]bool // the broadcast address of each of its IPv4 networks
	forwards  map[string]netip.AddrPort

	ctx    context.Context // ends with Close; bounds every dial
	cancel context.CancelFunc
	stop   func() bool // unregisters the context.AfterFunc of StartRelay's ctx

	mu     sync.Mutex // guards closed, conns and wg.Add from zero
	closed bool
	conns  map[io.Closer]struct{} // every open socket of the relay, either side
	wg     sync.WaitGroup
	once   sync.Once

	tcpN, udpN relayCounters
	budget     budget
	fwd        *forwarders // installed in h.fwd while the relay runs

	bufs       sync.Pool // *[]byte of tcpCopyBuffer bytes, for TCP copies
	udpB       sync.Pool // *[]byte of udpBuffer bytes, for UDP datagrams
	udpBatches sync.Pool // *udpBatch, for the up direction of UDP sessions

	// sessions are the open UDP sessions by key, for intercept: a map
	// that is never changed, replaced whole (under sessMu) when a
	// session opens or ends, so that a datagram's lookup takes no lock;
	// sessN is their number, so that intercept costs nothing while there
	// is none.
	sessMu   sync.Mutex
	sessions atomic.Pointer[map[udpKey]*udpSession]
	sessN    atomic.Int64
	// deadQ is the queue of a session that ended: closed, it refuses
	// every datagram (see udpSession.queue).
	deadQ *udpQueue
	// admitWait is udpAdmitWait; tests that check backpressure, not
	// the scheduler, make it long.
	admitWait time.Duration
	// holdUp, set by tests, holds every UDP session's up direction
	// until it is closed, so that its queue fills whatever the
	// scheduler does.
	holdUp chan struct{}
	// fastIn counts the datagrams the fast path took (queued or
	// dropped): with gVisor's count, what reached the relay.
	fastIn atomic.Uint64
}

// StartRelay starts relaying on h as cfg says, until Close or until ctx
// ends (then it stops as Close does, except that it does not wait: call
// Close to wait).
//
// A Host takes at most one Relay at a time. StartRelay may be called at
// any time, also while packets arrive: the host installed its transport
// handlers when it was made, and the relay's forwarders are swapped in
// atomically. Packets that arrived before are answered as by a host
// without a relay.
//
// Close the Relay before its Host. Host.Close also stops a Relay still
// running (it closes all its sockets) but does not wait for its
// goroutines; Relay.Close after Host.Close does.
func (h *Host) StartRelay(ctx context.Context, cfg hostcfg.RelayConfig) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stack: host %q: relay: %w", h.name, err)
	}
	if cfg.Transparent && h.s.HandleLocal() {
		return nil, fmt.Errorf("stack: host %q: relay: transparent mode needs a host made with HostConfig.Transparent", h.name)
	}
	fillDefaults(&cfg)
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	r := &Relay{
		h:         h,
		cfg:       cfg,
		log:       log.Named("relay").With(zap.String("host", h.name)),
		peer:      make(map[netip.Addr]bool),
		forwards:  make(map[string]netip.AddrPort),
		conns:     make(map[io.Closer]struct{}),
		budget:    budget{limit: cfg.Budget},
		deadQ:     &udpQueue{closed: true},
		admitWait: udpAdmitWait,
	}
	r.sessions.Store(&map[udpKey]*udpSession{})
	r.bufs.New = func() any { b := make([]byte, tcpCopyBuffer); return &b }
	r.udpB.New = func() any { b := make([]byte, udpBuffer); return &b }
	r.udpBatches.New = func() any { return newUDPBatch(udpBatchLen) }
	for _, f := range cfg.Forwards {
		for _, k := range f.Keys() {
			r.forwards[k] = netip.AddrPortFrom(f.To.Addr().Unmap(), f.To.Port())
		}
	}
	r.learnAddresses()

	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := h.attachRelay(r); err != nil {
		r.cancel()
		return nil, err
	}
	if cfg.Transparent {
		if err := h.transparent(); err != nil {
			r.Close()
			return nil, err
		}
	}
	if cfg.Services {
		if err := r.startUDPServices(); err != nil {
			r.Close()
			return nil, err
		}
	}
	r.stop = context.AfterFunc(ctx, r.shutdown)
	r.log.Debug("relay started", zap.Int("forwards", len(cfg.Forwards)), zap.Bool("transparent", cfg.Transparent),
		zap.Stringers("allow", prefixes(cfg.Allow)), zap.Bool("services", cfg.Services))
	return r, nil
}

// attachRelay registers r with h (so Host.Close stops it) and swaps its
// forwarders in (see Host.fwd).
// learnAddresses records the host's addresses as the peer's, and the
// directed broadcast addresses of its networks and of the machine's own,
// which the relay refuses (see special).
func (r *Relay) learnAddresses() {
	var nets []netip.Prefix
	for _, pa := range r.h.s.AllAddresses()[nicID] {
		a := addrOf(pa.AddressWithPrefix.Address)
		if a == broadcast4 {
			continue // gVisor's IPv4 endpoint lists it among its own
		}
		r.peer[a] = true
		nets = append(nets, netip.PrefixFrom(a, pa.AddressWithPrefix.PrefixLen))
	}
	// The machine's own networks too: their broadcast address is a
	// destination on this side of the path, never behind it.
	if ifas, err := net.InterfaceAddrs(); err == nil {
		for _, ifa := range ifas {
			if n, ok := ifa.(*net.IPNet); ok {
				ones, bits := n.Mask.Size()
				if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap().Is4() {
					nets = append(nets, netip.PrefixFrom(a.Unmap(), ones-(bits-32)))
				}
			}
		}
	}
	r.broadcast = directedBroadcasts(nets)
}

// transparent readies the host's NIC for a transparent relay.
// Promiscuous: the NIC accepts packets to any address, so a SYN to
// 10.99.1.5 reaches the forwarder. Spoofing: endpoints may send from such
// an address, so replies come from the destination the client asked for.
func (h *Host) transparent() error {
	if err := h.s.SetPromiscuousMode(nicID, true); err != nil {
		return fmt.Errorf("stack: host %q: relay: promiscuous mode: %s", h.name, err)
	}
	if err := h.s.SetSpoofing(nicID, true); err != nil {
		return fmt.Errorf("stack: host %q: relay: spoofing: %s", h.name, err)
	}
	return nil
}

func (h *Host) attachRelay(r *Relay) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("stack: host %q: relay: %w", h.name, net.ErrClosed)
	}
	for c := range h.closers {
		if _, ok := c.(*Relay); ok {
			return fmt.Errorf("stack: host %q: relay: the host has a relay already", h.name)
		}
	}
	r.fwd = &forwarders{
		relay: r,
		tcp:   tcp.NewForwarder(h.s, 0, maxTCPPending, r.handleTCP),
		udp:   udp.NewForwarder(h.s, r.handleUDP),
	}
	if !h.fwd.CompareAndSwap(nil, r.fwd) {
		// A relay closed but not yet untracked: its shutdown clears
		// fwd before it lets go of the host.
		return fmt.Errorf("stack: host %q: relay: the host has a relay already", h.name)
	}
	h.closers[r] = struct{}{}
	return nil
}

// Stats returns the relay's counters; safe at any time, also after Close.
func (r *Relay) Stats() hostcfg.RelayStats {
	return hostcfg.RelayStats{TCP: r.tcpN.snapshot(), UDP: r.udpN.snapshot(), BufferBytes: r.budget.used()}
}

// Close stops the relay, in this order: no new connection or session is
// taken (new TCP connection requests are reset, new UDP sessions get ICMP
// port unreachable, as with no relay); dials in progress are cancelled;
// every socket of the relay, on both sides, is closed; the host's NIC
// leaves promiscuous mode; then Close waits for every goroutine of the
// relay to end.
//
// A TCP handshake gVisor is completing for a client cannot be cancelled:
// Close waits for it to complete or fail, which takes gVisor up to about
// two minutes of SYN-ACK retries when the client has vanished mid-way.
// Closing the Host first aborts it at once. Close is idempotent and
// returns nil.
func (r *Relay) Close() error {
	if r.stop != nil {
		r.stop()
	}
	r.shutdown()
	r.wg.Wait()
	r.h.untrack(r)
	return nil
}

// closeEndpoint implements closer: Host.Close stops the relay, without
// waiting (the handshakes the relay might wait for end only when the host
// has closed its stack, which Host.Close does next).
func (r *Relay) closeEndpoint() { r.shutdown() }

func (r *Relay) shutdown() {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		conns := r.conns
		r.conns = nil
		r.mu.Unlock()
		if r.cancel != nil {
			r.cancel()
		}
		for c := range conns {
			c.Close()
		}
		if r.fwd != nil {
			r.h.fwd.CompareAndSwap(r.fwd, nil) // new requests get gVisor's own answer
		}
		if r.cfg.Transparent {
			r.h.s.SetSpoofing(nicID, false)
			r.h.s.SetPromiscuousMode(nicID, false)
		}
		r.log.Debug("relay closed", zap.Int("open", len(conns)))
	})
}

// enter admits one handler into the relay; it reports false once Close
// has begun. Every successful enter is paired with r.wg.Done.
func (r *Relay) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// keep registers sockets for Close to close; it reports false, and closes
// them, once Close has begun.
func (r *Relay) keep(cs ...io.Closer) bool {
	r.mu.Lock()
	if !r.closed {
		for _, c := range cs {
			r.conns[c] = struct{}{}
		}
		r.mu.Unlock()
		return true
	}
	r.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	return false
}

// release closes sockets registered with keep, unless Close has taken
// them over.
func (r *Relay) release(cs ...io.Closer) {
	r.mu.Lock()
	mine := cs[:0:0]
	for _, c := range cs {
		if _, ok := r.conns[c]; ok {
			delete(r.conns, c)
			mine = append(mine, c)
		}
	}
	r.mu.Unlock()
	for _, c := range mine {
		c.Close()
	}
}

// addrOf converts a gVisor address to a netip.Addr.
func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip
}
