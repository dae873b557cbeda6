package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
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

// Forward relays one port of the peer to a fixed target.
type Forward struct {
	// Proto is "tcp" or "udp".
	Proto string
	// Listen is the peer's port, on each of its addresses.
	Listen uint16
	// To is the target, reached with a host socket (127.0.0.1:5201).
	To netip.AddrPort
}

// RelayConfig describes a Relay. Validate reports every problem at once;
// zero durations mean their defaults.
type RelayConfig struct {
	// Forwards are the peer's relayed ports.
	Forwards []Forward
	// Transparent relays connections and datagrams to any destination
	// routed to the host, to that same destination, when it is in Allow.
	// The host must have been made with HostConfig.Transparent. The relay
	// makes its NIC promiscuous (it takes packets for every address) and
	// lets it answer from those addresses (spoofing).
	//
	// The host answers ICMP echo requests to every destination then, not
	// only to its own addresses: ping measures the emulated path, not the
	// destination. Allow must not hold destinations whose host sockets
	// route back into the TUN (a loop), unless Dial binds them elsewhere.
	Transparent bool
	// Allow lists the destinations transparent mode relays to. It must
	// not be empty in transparent mode, and no prefix may be /0: netjam
	// is never an open relay.
	Allow []netip.Prefix
	// Services runs echo (RFC 862) on port 7 and discard (RFC 863) on
	// port 9 of the peer, over TCP and UDP, for tests without a server.
	Services bool
	// UDPIdle ends a UDP session that has carried no datagram either way
	// for this long; 0 means DefaultUDPIdle.
	UDPIdle time.Duration
	// TCPIdle resets a relayed or served TCP connection that has carried
	// no byte either way for this long; 0 means DefaultTCPIdle. Without
	// it a client that vanished (or never meant to talk) would hold its
	// connection, its buffers and the target's socket for good.
	TCPIdle time.Duration
	// Budget bounds the bytes the relay's own buffers take across all
	// its connections and sessions (copy buffers, echo rings, datagram
	// buffers); 0 means DefaultBudget. A connection or session that would
	// take the relay past it is turned away (reset, dropped), counted as
	// Limited; an echo ring that cannot grow waits instead (backpressure).
	// The sockets' own buffers are bounded by their sizes, not by Budget.
	Budget int64
	// DialTimeout bounds connecting to a target; 0 means
	// DefaultDialTimeout. A TCP client's SYN is answered only once the
	// target has accepted, and reset if the target cannot be reached.
	DialTimeout time.Duration
	// Dial opens the host socket to a target: network "tcp" or "udp" and
	// an address as net.Dial takes it. nil means a net.Dialer with
	// DialTimeout. Replace it to mark the relay's sockets (SO_MARK) or
	// bind them to a device, so that in transparent mode its own traffic
	// does not route back into the TUN, or (in tests) to dial inside
	// another network namespace. It must honour ctx.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Log is the logger; nil means none. Nothing is logged per packet;
	// each refused or failed connection is logged at debug level.
	Log *zap.Logger
}

// Defaults of RelayConfig.
const (
	DefaultUDPIdle     = 60 * time.Second
	DefaultDialTimeout = 10 * time.Second
	// DefaultTCPIdle is when Linux's TCP keepalive, with its defaults,
	// would start probing a silent connection.
	DefaultTCPIdle = 2 * time.Hour
	// DefaultBudget holds 2048 relayed TCP connections' copy buffers, or
	// 64 echo connections whose rings all grew to their cap.
	DefaultBudget = 256 << 20
)

// Limits of a Relay. Beyond them new connections are reset and new UDP
// sessions dropped, counted as Limited: a relay on a real machine must not
// let a misbehaving client exhaust its descriptors or memory.
const (
	// maxTCPPending bounds TCP connection requests being decided (dial
	// in progress or handshake being completed): gVisor ignores further
	// SYNs until one completes, and the client retransmits.
	maxTCPPending = 256
	// maxTCPConns bounds open relayed and served TCP connections. Each
	// holds two goroutines, two copy buffers and two sockets.
	maxTCPConns = 4096
	// maxUDPSessions bounds open UDP sessions. Each holds two goroutines
	// and two sockets.
	maxUDPSessions = 4096
	// tcpCopyBuffer is the size of each direction's copy buffer: what a
	// connection holds in flight inside the relay, besides the sockets'
	// own buffers. Writes block when the far side is full, so a slow
	// reader slows the writer (backpressure) instead of filling memory.
	tcpCopyBuffer = 64 << 10
	// udpBuffer holds the largest UDP payload.
	udpBuffer = 64 << 10
	// udpCharge is what a UDP session takes of the budget: a datagram
	// buffer per direction, held while it waits.
	udpCharge = 2 * udpBuffer
	// echoBuffer is the most the TCP echo service holds between reading
	// and writing back, per connection (see echoTCP for why it holds
	// any); its ring starts at echoInitial bytes and doubles when full, so
	// an idle or interactive connection holds little.
	echoBuffer  = 4 << 20
	echoInitial = 16 << 10
)

// Service ports.
const (
	echoPort    = 7
	discardPort = 9
)

// Validate reports every invalid field of c, each as its own error.
func (c *RelayConfig) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	seen := make(map[string]int)
	for i, f := range c.Forwards {
		if f.Proto != "tcp" && f.Proto != "udp" {
			add("forwards[%d].proto: %q is not tcp or udp", i, f.Proto)
		}
		if f.Listen == 0 {
			add("forwards[%d].listen: must not be 0", i)
		}
		to := f.To.Addr().Unmap()
		switch {
		case !f.To.IsValid():
			add("forwards[%d].to: must be an address and a port", i)
		case f.To.Port() == 0:
			add("forwards[%d].to: %v has port 0", i, f.To)
		case to.IsUnspecified() || to.IsMulticast():
			add("forwards[%d].to: %v is not a unicast address", i, f.To)
		}
		key := f.Proto + "/" + strconv.Itoa(int(f.Listen))
		if j, ok := seen[key]; ok && f.Listen != 0 {
			add("forwards[%d]: %s port %d is forwarded already by forwards[%d]", i, f.Proto, f.Listen, j)
		} else {
			seen[key] = i
		}
		if c.Services && (f.Listen == echoPort || f.Listen == discardPort) {
			add("forwards[%d].listen: port %d is a service's (echo 7, discard 9) while services are on", i, f.Listen)
		}
	}
	for i, p := range c.Allow {
		switch {
		case !p.IsValid():
			add("allow[%d]: %v is not a valid prefix", i, p)
		case p.Bits() == 0:
			add("allow[%d]: %v allows every destination, and netjam is never an open relay: list the networks to reach", i, p)
		}
	}
	switch {
	case c.Transparent && len(c.Allow) == 0:
		add("allow: transparent mode needs at least one prefix (netjam is never an open relay)")
	case !c.Transparent && len(c.Allow) > 0:
		add("allow: only transparent mode uses it")
	}
	if c.UDPIdle < 0 {
		add("udp_idle: %v is negative", c.UDPIdle)
	}
	if c.TCPIdle < 0 {
		add("tcp_idle: %v is negative", c.TCPIdle)
	}
	if c.Budget < 0 {
		add("budget: %d is negative", c.Budget)
	}
	if c.DialTimeout < 0 {
		add("dial_timeout: %v is negative", c.DialTimeout)
	}
	return errors.Join(errs...)
}

// RelayStats are a Relay's counters since StartRelay, per protocol.
type RelayStats struct {
	TCP RelayCounters `json:"tcp"`
	UDP RelayCounters `json:"udp"`
	// BufferBytes is what the relay's own buffers take now, of Budget.
	BufferBytes int64 `json:"buffer_bytes"`
}

// RelayCounters count one protocol's connections (TCP) or sessions (UDP:
// the datagrams between one client address and one destination) and their
// bytes.
type RelayCounters struct {
	// Relayed counts connections or sessions relayed to a target (a
	// Forward's, or the destination in transparent mode) once the target
	// was reached.
	Relayed uint64 `json:"relayed"`
	// Served counts connections (TCP) or datagrams (UDP) handled by the
	// echo and discard services.
	Served uint64 `json:"served"`
	// Refused counts connections (reset) and UDP datagrams (dropped) to a
	// destination that is neither the peer nor in Allow, or that the
	// relay never reaches (see RefusedBy).
	Refused uint64 `json:"refused"`
	// RefusedBy splits Refused by reason: "not_allowed" (outside Allow),
	// or a destination refused whatever Allow says: "unspecified",
	// "loopback", "multicast", "broadcast", "link_local", "ipv4_mapped".
	// Reasons that never happened are left out.
	RefusedBy map[string]uint64 `json:"refused_by,omitempty"`
	// NoService counts connections and UDP datagrams to a port of the
	// peer that has no Forward or service (TCP reset, ICMP port
	// unreachable).
	NoService uint64 `json:"no_service"`
	// Limited counts connections (reset) and UDP datagrams (dropped)
	// turned away because the relay's limits were reached: its count of
	// connections or sessions, or its Budget (counted in OverBudget too).
	Limited uint64 `json:"limited"`
	// OverBudget counts the part of Limited turned away for Budget.
	OverBudget uint64 `json:"over_budget"`
	// Idle counts TCP connections reset after TCPIdle without a byte.
	Idle uint64 `json:"idle"`
	// DialErrors counts targets that could not be reached: the TCP client
	// is reset, the UDP session's datagrams are dropped.
	DialErrors uint64 `json:"dial_errors"`
	// Resets counts relayed connections that one end reset (or wrote to
	// after the other had closed: iperf3's server closes its data
	// connection at the end of a test while the client's last data are
	// still on their way, and the write of those gets EPIPE), a reset the
	// relay passed on to the other end as a direct connection would have
	// seen it. Not a failure of the relay.
	Resets uint64 `json:"resets"`
	// Errors counts relayed or served connections that ended in a
	// failure of the relay's own (a write or read failing other than by
	// the other end's reset), and endpoints gVisor failed to create.
	Errors uint64 `json:"errors"`
	// Dropped counts UDP datagrams the relay lost: its socket toward the
	// client overflowed (the relay fell behind the datagrams arriving
	// through the path), or the write toward either side failed. Counted
	// when the session ends.
	Dropped uint64 `json:"dropped"`
	// Active is the number of connections or sessions open now.
	Active int64 `json:"active"`
	// BytesUp counts payload bytes from clients toward targets (or into
	// the services), BytesDown payload bytes back to clients.
	BytesUp   uint64 `json:"bytes_up"`
	BytesDown uint64 `json:"bytes_down"`
}

// relayCounters are one protocol's live counters.
type relayCounters struct {
	relayed, served, refused, noService, limited, overBudget, idle, dialErrors, resets, errors, dropped atomic.Uint64
	active                                                                                              atomic.Int64
	up, down                                                                                            atomic.Uint64
	refusedBy                                                                                           [nRefusals]atomic.Uint64
}

// refuse counts a refusal for why.
func (c *relayCounters) refuse(why refusal) {
	c.refused.Add(1)
	c.refusedBy[why].Add(1)
}

func (c *relayCounters) snapshot() RelayCounters {
	var by map[string]uint64
	for why := range c.refusedBy {
		if n := c.refusedBy[why].Load(); n > 0 {
			if by == nil {
				by = make(map[string]uint64)
			}
			by[refusal(why).String()] = n
		}
	}
	return RelayCounters{RefusedBy: by,
		Relayed: c.relayed.Load(), Served: c.served.Load(), Refused: c.refused.Load(),
		NoService: c.noService.Load(), Limited: c.limited.Load(), OverBudget: c.overBudget.Load(), Idle: c.idle.Load(), DialErrors: c.dialErrors.Load(),
		Resets: c.resets.Load(), Errors: c.errors.Load(), Dropped: c.dropped.Load(), Active: c.active.Load(), BytesUp: c.up.Load(), BytesDown: c.down.Load(),
	}
}

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
	cfg RelayConfig
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

	bufs sync.Pool // *[]byte of tcpCopyBuffer bytes, for TCP copies
	udpB sync.Pool // *[]byte of udpBuffer bytes, for UDP datagrams
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
func (h *Host) StartRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stack: host %q: relay: %w", h.name, err)
	}
	if cfg.Transparent && h.s.HandleLocal() {
		return nil, fmt.Errorf("stack: host %q: relay: transparent mode needs a host made with HostConfig.Transparent", h.name)
	}
	if cfg.UDPIdle == 0 {
		cfg.UDPIdle = DefaultUDPIdle
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.TCPIdle == 0 {
		cfg.TCPIdle = DefaultTCPIdle
	}
	if cfg.Budget == 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout}
		cfg.Dial = d.DialContext
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	r := &Relay{
		h:        h,
		cfg:      cfg,
		log:      log.Named("relay").With(zap.String("host", h.name)),
		peer:     make(map[netip.Addr]bool),
		forwards: make(map[string]netip.AddrPort),
		conns:    make(map[io.Closer]struct{}),
		budget:   budget{limit: cfg.Budget},
	}
	r.bufs.New = func() any { b := make([]byte, tcpCopyBuffer); return &b }
	r.udpB.New = func() any { b := make([]byte, udpBuffer); return &b }
	for _, f := range cfg.Forwards {
		r.forwards[f.Proto+"/"+strconv.Itoa(int(f.Listen))] = netip.AddrPortFrom(f.To.Addr().Unmap(), f.To.Port())
	}
	var nets []netip.Prefix
	for _, pa := range h.s.AllAddresses()[nicID] {
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

	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := h.attachRelay(r); err != nil {
		r.cancel()
		return nil, err
	}
	if cfg.Transparent {
		// Promiscuous: the NIC accepts packets to any address, so a
		// SYN to 10.99.1.5 reaches the forwarder. Spoofing: endpoints
		// may send from such an address, so replies come from the
		// destination the client asked for.
		if err := h.s.SetPromiscuousMode(nicID, true); err != nil {
			r.Close()
			return nil, fmt.Errorf("stack: host %q: relay: promiscuous mode: %s", h.name, err)
		}
		if err := h.s.SetSpoofing(nicID, true); err != nil {
			r.Close()
			return nil, fmt.Errorf("stack: host %q: relay: spoofing: %s", h.name, err)
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
		tcp: tcp.NewForwarder(h.s, 0, maxTCPPending, r.handleTCP),
		udp: udp.NewForwarder(h.s, r.handleUDP),
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
func (r *Relay) Stats() RelayStats {
	return RelayStats{TCP: r.tcpN.snapshot(), UDP: r.udpN.snapshot(), BufferBytes: r.budget.used()}
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

// action is what the relay does with a new connection or session.
type action int

const (
	actRefuse    action = iota // not the peer, not allowed
	actNoService               // the peer, a port with nothing behind it
	actRelay                   // to a target
	actEcho
	actDiscard
)

// decide picks the action for a new connection or session to dst, the
// target when it is relayed, and the reason when it is refused. Special
// destinations (see special) are refused before Allow is looked at.
func (r *Relay) decide(proto string, dst netip.AddrPort) (action, netip.AddrPort, refusal) {
	if r.peer[dst.Addr()] {
		if to, ok := r.forwards[proto+"/"+strconv.Itoa(int(dst.Port()))]; ok {
			return actRelay, to, 0
		}
		if r.cfg.Services {
			switch dst.Port() {
			case echoPort:
				return actEcho, netip.AddrPort{}, 0
			case discardPort:
				return actDiscard, netip.AddrPort{}, 0
			}
		}
		return actNoService, netip.AddrPort{}, 0
	}
	if why := r.special(dst.Addr()); why != refusedNotAllowed {
		return actRefuse, netip.AddrPort{}, why
	}
	if r.cfg.Transparent {
		for _, p := range r.cfg.Allow {
			if p.Contains(dst.Addr()) {
				return actRelay, dst, 0
			}
		}
	}
	return actRefuse, netip.AddrPort{}, refusedNotAllowed
}

// dial connects to target with the configured Dial, bounded by
// DialTimeout and by Close.
func (r *Relay) dial(network string, target netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.DialTimeout)
	defer cancel()
	return r.cfg.Dial(ctx, network, target.String())
}

// handleTCP decides a TCP connection request, on the goroutine gVisor's
// forwarder started for it, and carries the connection on that goroutine
// if it is accepted. The target is dialled before the client's handshake
// is completed, so an unreachable target looks to the client like a
// refused connection.
func (r *Relay) handleTCP(req *tcp.ForwarderRequest) {
	if !r.enter() {
		req.Complete(true)
		return
	}
	defer r.wg.Done()
	id := req.ID()
	src := netip.AddrPortFrom(addrOf(id.RemoteAddress), id.RemotePort)
	dst := netip.AddrPortFrom(addrOf(id.LocalAddress), id.LocalPort)
	act, target, why := r.decide("tcp", dst)
	switch act {
	case actRefuse:
		r.tcpN.refuse(why)
		r.log.Debug("tcp refused", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Stringer("reason", why))
		req.Complete(true)
		return
	case actNoService:
		r.tcpN.noService.Add(1)
		r.log.Debug("tcp reset: no forward or service on this port", zap.Stringer("src", src), zap.Stringer("dst", dst))
		req.Complete(true)
		return
	}
	if r.tcpN.active.Add(1) > maxTCPConns {
		r.tcpN.active.Add(-1)
		r.tcpN.limited.Add(1)
		r.log.Debug("tcp reset: the relay's connection limit is reached", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Int("limit", maxTCPConns))
		req.Complete(true)
		return
	}
	defer r.tcpN.active.Add(-1)
	charge := tcpCharge(act)
	if !r.budget.take(charge) {
		r.tcpN.limited.Add(1)
		r.tcpN.overBudget.Add(1)
		r.log.Debug("tcp limited: the relay's buffer budget is spent", zap.Stringer("src", src), zap.Stringer("dst", dst))
		req.Complete(true)
		return
	}
	defer r.budget.give(charge)

	var out net.Conn
	if act == actRelay {
		var err error
		if out, err = r.dial("tcp", target); err != nil {
			r.tcpN.dialErrors.Add(1)
			r.log.Debug("tcp dial failed", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Error(err))
			req.Complete(true)
			return
		}
	}
	var wq waiter.Queue
	ep, terr := req.CreateEndpoint(&wq)
	if terr != nil {
		// The client went away during the handshake.
		req.Complete(true)
		r.tcpN.errors.Add(1)
		r.log.Debug("tcp relay failed: no endpoint for the client's connection", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Stringer("error", terr))
		if out != nil {
			out.Close()
		}
		return
	}
	req.Complete(false)
	// No Nagle on the relay's side: the target's writes arrive already
	// shaped by its own stack, and coalescing them again would add a
	// round trip to every small exchange that a direct connection would
	// not have.
	ep.SocketOptions().SetDelayOption(false)
	in := &relayTCP{TCPConn: gonet.NewTCPConn(&wq, ep), ep: ep}
	if !r.keep(in) {
		if out != nil {
			out.Close()
		}
		return
	}
	seen := newActivity(r.cfg.TCPIdle) // for TCPIdle, from the handshake on
	switch act {
	case actRelay:
		if !r.keep(out) {
			r.release(in)
			return
		}
		r.tcpN.relayed.Add(1)
		r.pipe(in, out, seen)
	case actEcho:
		r.tcpN.served.Add(1)
		r.echoTCP(in, seen)
	case actDiscard:
		r.tcpN.served.Add(1)
		r.discardTCP(in, seen)
	}
}

// relayTCP is the client's side of a relayed or served connection:
// gonet's conn and its endpoint, closed exactly once (gVisor's
// Endpoint.Close must be called once), either gracefully or with a reset.
type relayTCP struct {
	*gonet.TCPConn
	ep   tcpip.Endpoint
	once sync.Once
}

// Close closes the connection (a FIN after what is queued).
func (c *relayTCP) Close() error {
	c.once.Do(func() { c.TCPConn.Close() })
	return nil
}

// abort resets the connection, unless it is closed already.
func (c *relayTCP) abort() {
	c.once.Do(func() {
		c.ep.Abort()
		c.TCPConn.Close()
	})
}

// relayUDP is a UDP socket of the relay on the host, closed exactly once.
type relayUDP struct {
	*gonet.UDPConn
	ep   tcpip.Endpoint
	once sync.Once
}

// overflows returns the datagrams the socket dropped because its receive
// buffer was full.
func (c *relayUDP) overflows() uint64 {
	if st, ok := c.ep.Stats().(*tcpip.TransportEndpointStats); ok {
		return st.ReceiveErrors.ReceiveBufferOverflow.Value()
	}
	return 0
}

// Close closes the socket.
func (c *relayUDP) Close() error {
	c.once.Do(func() { c.UDPConn.Close() })
	return nil
}

// pipe copies between the client's connection and the target's, one
// direction on this goroutine and one on another, until both directions
// have ended. End of stream in one direction is passed on as a half-close
// (CloseWrite) and the other direction goes on; an error in either (a
// reset, a failed write), or TCPIdle without a byte either way, resets
// both connections.
//
// The directions never wait for each other, so the client's side keeps
// being read whenever the target takes data. A target that stops reading
// until it has written (an echo server with full socket buffers) can
// still stall the connection through gVisor's zero-window handling (see
// echoTCP); the relay cannot buffer its way out of that without bound.
func (r *Relay) pipe(in *relayTCP, out net.Conn, a *activity) {
	var failed, reset atomic.Bool
	abort := func(way string, err error) {
		if failed.CompareAndSwap(false, true) {
			reset.Store(isReset(err))
			if !r.isClosed() {
				msg := "tcp relay failed: both ends reset"
				switch {
				case err == errIdle:
					msg = "tcp connection idle too long: both ends reset"
				case reset.Load():
					msg = "tcp connection reset by an end: reset passed on to the other"
				}
				r.log.Debug(msg, zap.String("way", way),
					zap.Stringer("client", in.RemoteAddr()), zap.Stringer("target", out.RemoteAddr()), zap.Error(err))
			}
			in.abort()
			if tc, ok := out.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with a reset
			}
			out.Close()
		}
	}
	var idled atomic.Bool
	end := func(way string, err error) {
		if err == errIdle {
			idled.Store(true)
		}
		abort(way, err)
	}
	done := make(chan struct{})
	r.wg.Add(1) // the caller holds a count, so Add is safe
	go func() {
		defer r.wg.Done()
		defer close(done)
		if err := r.copyHalf(out, in, &r.tcpN.up, a); err != nil {
			end("client to target", err)
		}
	}()
	if err := r.copyHalf(in, out, &r.tcpN.down, a); err != nil {
		end("target to client", err)
	}
	<-done
	if failed.Load() && reset.Load() && !idled.Load() && !r.isClosed() {
		r.tcpN.resets.Add(1)
	} else {
		r.countEnd(failed.Load(), idled.Load())
	}
	r.release(in, out)
}

// isReset reports whether err, from a read or write of a relayed
// connection, is the other end's doing: a reset (ECONNRESET from the
// host's socket, gVisor's "connection reset by peer" from the client's),
// or a write after that end closed (EPIPE).
func isReset(err error) bool {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	// gonet gives gVisor's errors as text only.
	return strings.HasSuffix(err.Error(), (&tcpip.ErrConnectionReset{}).String())
}

// countEnd counts how a served or relayed connection ended, unless Close
// ended it.
func (r *Relay) countEnd(failed, idle bool) {
	switch {
	case r.isClosed():
	case idle:
		r.tcpN.idle.Add(1)
	case failed:
		r.tcpN.errors.Add(1)
	}
}

// copyHalf copies src to dst until src ends, then half-closes dst. It
// returns an error when the copy failed or the connection was idle for
// TCPIdle (errIdle), not at end of stream.
func (r *Relay) copyHalf(dst, src net.Conn, n *atomic.Uint64, a *activity) error {
	bp := r.bufs.Get().(*[]byte)
	defer r.bufs.Put(bp)
	buf := (*bp)[:cap(*bp)]
	src.SetReadDeadline(a.deadline())
	for {
		nr, er := readIdle(src, buf, a)
		if nr > 0 {
			nw, ew := dst.Write(buf[:nr])
			n.Add(uint64(nw))
			a.touch()
			if ew != nil {
				return ew
			}
		}
		if er == io.EOF {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return nil
		}
		if er != nil {
			return er
		}
	}
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// echoTCP sends back what the client sends, then half-closes.
//
// Reading and writing run on two goroutines with a ring of echoBuffer
// bytes between them, rather than one loop that reads only once its last
// write is done. Such a loop stops reading whenever a write waits, and a
// gVisor endpoint whose application stops reading can stall for good:
// when its buffer fills (out-of-order segments included) it advertises a
// zero window, and with a zero window it accepts no segment carrying data,
// not even the retransmission that fills the hole in front of the
// out-of-order data, nor the acknowledgements in the peer's segments past
// a window edge it has moved back (transport/tcp receiver.acceptable; see
// gvisor#10312 on its shrinking windows). Measured here before this
// change: one 4 MiB echo in five stalled for good.
func (r *Relay) echoTCP(c *relayTCP, a *activity) {
	ring := newByteRing(echoInitial, echoBuffer, r.budget.take)
	defer func() { r.budget.give(int64(ring.size() - echoInitial)) }() // the first size is the caller's
	var failed, idled atomic.Bool
	fail := func(op string, err error) {
		if failed.CompareAndSwap(false, true) {
			if !r.isClosed() {
				r.log.Debug("tcp echo failed", zap.String("op", op), zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
			}
			c.abort()    // wakes a blocked Read or Write
			ring.close() // wakes the other goroutine
		}
	}
	done := make(chan struct{})
	r.wg.Add(1) // the caller holds a count, so Add is safe
	go func() {
		defer r.wg.Done()
		defer close(done)
		for {
			b := ring.readable()
			if b == nil {
				break // end of stream, or failed
			}
			n, err := c.Write(b)
			r.tcpN.down.Add(uint64(n))
			a.touch()
			ring.consumed(n)
			if err != nil {
				fail("write", err)
				return
			}
		}
		if !failed.Load() {
			c.CloseWrite()
		}
	}()
	c.SetReadDeadline(a.deadline())
	for {
		b := ring.writable()
		if b == nil {
			break // failed
		}
		n, err := readIdle(c, b, a)
		r.tcpN.up.Add(uint64(n))
		ring.produced(n)
		if err == io.EOF {
			ring.close()
			break
		}
		if err != nil {
			idled.Store(err == errIdle)
			fail("read", err)
			break
		}
	}
	<-done
	r.countEnd(failed.Load(), idled.Load())
	r.release(c)
}

// discardTCP reads and drops what the client sends until it closes.
func (r *Relay) discardTCP(c *relayTCP, a *activity) {
	bp := r.bufs.Get().(*[]byte)
	defer r.bufs.Put(bp)
	buf := (*bp)[:cap(*bp)]
	c.SetReadDeadline(a.deadline())
	for {
		n, err := readIdle(c, buf, a)
		r.tcpN.up.Add(uint64(n))
		if err == io.EOF {
			break
		}
		if err != nil {
			if err == errIdle {
				c.abort()
			}
			if !r.isClosed() {
				r.log.Debug("tcp discard ended", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
			}
			r.countEnd(true, err == errIdle)
			break
		}
	}
	r.release(c)
}

// handleUDP decides a new UDP session (the first datagram between a
// client address and a destination the host has no endpoint for). gVisor
// calls it on the goroutine that delivers the datagram (the caller of
// Inject), so it must not block: the session's goroutine dials. Returning
// false makes gVisor answer ICMP port unreachable.
func (r *Relay) handleUDP(req *udp.ForwarderRequest) bool {
	if !r.enter() {
		return false
	}
	defer r.wg.Done()
	id := req.ID()
	src := netip.AddrPortFrom(addrOf(id.RemoteAddress), id.RemotePort)
	dst := netip.AddrPortFrom(addrOf(id.LocalAddress), id.LocalPort)
	act, target, why := r.decide("udp", dst)
	switch act {
	case actRefuse:
		r.udpN.refuse(why)
		r.log.Debug("udp refused", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Stringer("reason", why))
		return true // dropped without a word
	case actRelay:
	default:
		// The services are bound sockets; only their absence gets
		// here.
		r.udpN.noService.Add(1)
		return false
	}
	if r.udpN.active.Add(1) > maxUDPSessions {
		r.udpN.active.Add(-1)
		r.udpN.limited.Add(1)
		r.log.Debug("udp dropped: the relay's session limit is reached", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Int("limit", maxUDPSessions))
		return true
	}
	if !r.budget.take(udpCharge) {
		r.udpN.active.Add(-1)
		r.udpN.limited.Add(1)
		r.udpN.overBudget.Add(1)
		r.log.Debug("udp limited: the relay's buffer budget is spent", zap.Stringer("src", src), zap.Stringer("dst", dst))
		return true
	}
	var wq waiter.Queue
	ep, terr := req.CreateEndpoint(&wq)
	if terr != nil {
		r.udpN.active.Add(-1)
		r.budget.give(udpCharge)
		r.udpN.errors.Add(1)
		r.log.Debug("udp relay failed: no endpoint for the client's session", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Stringer("error", terr))
		return true
	}
	in := &relayUDP{UDPConn: gonet.NewUDPConn(&wq, ep), ep: ep}
	if !r.keep(in) {
		r.udpN.active.Add(-1)
		r.budget.give(udpCharge)
		return true
	}
	r.wg.Add(1) // this handler holds a count: Add is safe
	go r.udpSession(in, target)
	return true
}

// udpSession relays one UDP session: datagrams from the client (queued in
// in's endpoint, starting with the first) to a host socket connected to
// target, and datagrams from target back, until neither way has carried a
// datagram for UDPIdle, or Close.
func (r *Relay) udpSession(in *relayUDP, target netip.AddrPort) {
	defer r.wg.Done()
	defer r.udpN.active.Add(-1)
	defer r.budget.give(udpCharge)
	out, err := r.dial("udp", target)
	if err != nil {
		r.udpN.dialErrors.Add(1)
		r.log.Debug("udp dial failed", zap.Stringer("dst", target), zap.Error(err))
		r.release(in)
		return
	}
	if !r.keep(out) {
		r.release(in)
		return
	}
	r.udpN.relayed.Add(1)
	// last is the time of the session's last datagram either way, in
	// nanoseconds since start, on the monotonic clock.
	start := time.Now()
	var last atomic.Int64
	touch := func() { last.Store(int64(time.Since(start))) }
	var dead atomic.Bool // the target's socket failed
	// Failures are logged once per session, with the first cause and
	// the count, not once per datagram.
	var dropped atomic.Uint64
	var firstErr atomic.Pointer[error]
	drop := func(way string, err error) {
		dropped.Add(1)
		r.udpN.dropped.Add(1)
		if firstErr.Load() == nil {
			e := fmt.Errorf("%s: %w", way, err)
			firstErr.CompareAndSwap(nil, &e)
		}
	}

	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		bp := r.udpB.Get().(*[]byte)
		defer r.udpB.Put(bp)
		for {
			n, err := out.Read(*bp)
			if err != nil {
				if errors.Is(err, syscall.ECONNREFUSED) {
					continue // an ICMP error from the target: keep the session
				}
				dead.Store(true)
				if !r.isClosed() {
					r.log.Debug("udp relay failed: the target's socket", zap.Stringer("target", target), zap.Error(err))
				}
				in.SetReadDeadline(time.Now()) // wake the other direction
				return
			}
			touch()
			if _, err := in.Write((*bp)[:n]); err == nil {
				r.udpN.down.Add(uint64(n))
			} else {
				drop("to the client", err)
			}
		}
	}()

	bp := r.udpB.Get().(*[]byte)
	defer r.udpB.Put(bp)
	idle := r.cfg.UDPIdle
	for {
		// The deadline is the session's idle end as known now; when it
		// passes, a datagram the other way may have moved it.
		in.SetReadDeadline(start.Add(time.Duration(last.Load()) + idle))
		n, err := in.Read(*bp)
		if err != nil {
			if isTimeout(err) && !dead.Load() && time.Since(start) < time.Duration(last.Load())+idle {
				continue
			}
			break
		}
		touch()
		if _, err := out.Write((*bp)[:n]); err == nil {
			r.udpN.up.Add(uint64(n))
		} else {
			drop("to the target", err)
		}
		// A write that blocked (the target's socket full) kept the
		// session busy: idle counts from its end, or the datagrams
		// queued meanwhile would be left unread when it ends.
		touch()
	}
	r.release(in, out)
	overflows := in.overflows()
	r.udpN.dropped.Add(overflows)
	if n := dropped.Load(); n > 0 || overflows > 0 {
		var cause error
		if p := firstErr.Load(); p != nil {
			cause = *p
		}
		r.log.Debug("udp session dropped datagrams", zap.Stringer("target", target), zap.Uint64("write_failures", n),
			zap.Uint64("socket_overflows", overflows), zap.NamedError("first_cause", cause))
	}
}

// startUDPServices binds echo and discard to each peer address (not to
// the unspecified address: in transparent mode that would capture port 7
// of every destination).
func (r *Relay) startUDPServices() error {
	for a := range r.peer {
		proto := ipv4.ProtocolNumber
		if a.Is6() {
			proto = ipv6.ProtocolNumber
		}
		for _, port := range []uint16{echoPort, discardPort} {
			ap := netip.AddrPortFrom(a, port)
			var wq waiter.Queue
			ep, terr := r.h.s.NewEndpoint(udp.ProtocolNumber, proto, &wq)
			if terr != nil {
				return opError("listen", "udp", ap, terr)
			}
			if terr := ep.Bind(fullAddr(ap)); terr != nil {
				ep.Close()
				return opError("listen", "udp", ap, terr)
			}
			c := &relayUDP{UDPConn: gonet.NewUDPConn(&wq, ep), ep: ep}
			if !r.keep(c) {
				return net.ErrClosed
			}
			r.wg.Add(1)
			go r.serveUDP(c, port == echoPort)
		}
	}
	return nil
}

// serveUDP answers each datagram with itself (echo) or not at all
// (discard), until Close.
func (r *Relay) serveUDP(c *relayUDP, echo bool) {
	defer r.wg.Done()
	defer func() { r.udpN.dropped.Add(c.overflows()) }()
	bp := r.udpB.Get().(*[]byte)
	defer r.udpB.Put(bp)
	for {
		n, from, err := c.ReadFrom(*bp)
		if err != nil {
			return
		}
		r.udpN.up.Add(uint64(n))
		r.udpN.served.Add(1)
		if echo {
			if _, err := c.WriteTo((*bp)[:n], from); err == nil {
				r.udpN.down.Add(uint64(n))
			} else {
				r.udpN.dropped.Add(1)
			}
		}
	}
}

// addrOf converts a gVisor address to a netip.Addr.
func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip
}
