package hostcfg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// What a relay (stack.Relay, TUN mode's end of the path) is told
// (RelayConfig, its defaults) and what it counts (RelayStats).

// Forward relays one port of the peer to a fixed target.
type Forward struct {
	// Proto is "tcp" or "udp".
	Proto string
	// Listen is the peer's port, on each of its addresses.
	Listen uint16
	// To is the target, reached with a host socket (127.0.0.1:5201).
	To netip.AddrPort
	// Addrs, when not empty, are the only peer addresses the forward
	// answers on (in TUN mode, its path's: the scenario's path key); an
	// empty Addrs answers on every one. A port may have one forward of
	// each address, and one for the others.
	Addrs []netip.Addr
}

// ForwardKey is how the relay finds a forward: by protocol and port, and
// by the peer's address for one bound to it (addr valid).
func ForwardKey(proto string, addr netip.Addr, port uint16) string {
	if addr.IsValid() {
		return proto + "/" + addr.Unmap().String() + "/" + strconv.Itoa(int(port))
	}
	return proto + "/" + strconv.Itoa(int(port))
}

// Keys returns the relay's keys of f (ForwardKey): one per address, or
// the port's.
func (f Forward) Keys() []string {
	if len(f.Addrs) == 0 {
		return []string{ForwardKey(f.Proto, netip.Addr{}, f.Listen)}
	}
	out := make([]string, len(f.Addrs))
	for i, a := range f.Addrs {
		out[i] = ForwardKey(f.Proto, a, f.Listen)
	}
	return out
}

// RelayConfig describes a relay (stack.Relay). Validate reports every problem at once;
// zero durations mean their defaults.
type RelayConfig struct {
	// Forwards are the peer's relayed ports.
	Forwards []Forward
	// Transparent relays connections and datagrams to any destination
	// routed to the host, to that same destination, when it is in Allow.
	// The host must have been made with stack.HostConfig.Transparent. The relay
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
	// Budget bounds the bytes every buffer of the relay's connections and
	// sessions may take: its own (copy buffers, echo rings, datagram
	// buffers) and gVisor's send and receive buffers of the TCP
	// connections it serves and relays (stack/relay_buffers.go); 0 means
	// DefaultBudget. A connection or session that would take the relay
	// past it is turned away (reset, dropped), counted as Limited and
	// OverBudget. Past three quarters of it (the pressure mark) no buffer
	// grows: an echo ring waits (backpressure), a socket buffer keeps its
	// size. The host sockets toward targets are the kernel's memory, not
	// netjam's, and bounded by the kernel.
	Budget int64
	// DialTimeout bounds connecting to a target; 0 means
	// DefaultDialTimeout. A TCP client's SYN is answered only once the
	// target has accepted, and reset if the target cannot be reached.
	DialTimeout time.Duration
	// Busy, when set, reports whether the path toward the clients can
	// take no more now (its input is full). The down direction of a UDP
	// session then leaves its socket toward the target unread until it
	// can, so that when a target sends more than the machine carries,
	// the kernel drops the excess at that socket (counted, from_target)
	// before netjam does any work on it, rather than the path dropping it
	// after the work: as TUN mode's read loop sheds at the device.
	Busy func() bool
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
	// DefaultBudget admits about 1480 echo or discard connections, or
	// 900 relayed ones, at their first sizes (stack's tcpCharge); 1000 echo
	// connections that never read then hold netjam under about 300 MiB
	// (TestTUNNeverReadingEchoMemory).
	DefaultBudget = 256 << 20
)

// The ports of the relay's services (RelayConfig.Services), on the peer's
// addresses: echo (RFC 862) and discard (RFC 863).
const (
	EchoPort    = 7
	DiscardPort = 9
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
		for _, key := range f.Keys() {
			if j, ok := seen[key]; ok && f.Listen != 0 {
				add("forwards[%d]: %s port %d is forwarded already by forwards[%d]", i, f.Proto, f.Listen, j)
				break
			}
			seen[key] = i
		}
		for _, a := range f.Addrs {
			if !a.IsValid() {
				add("forwards[%d].addrs: an address is not valid", i)
			}
		}
		if c.Services && (f.Listen == EchoPort || f.Listen == DiscardPort) {
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

// RelayStats are a relay's counters since it started (stack.Relay.Stats),
// per protocol.
type RelayStats struct {
	TCP RelayCounters `json:"tcp"`
	UDP RelayCounters `json:"udp"`
	// BufferBytes is what the relay's buffers, and gVisor's of its TCP
	// connections, take now, of Budget.
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
	// through the path for longer than Inject waits for it), its socket
	// toward the target did (the relay fell behind the target's
	// datagrams), or the write toward either side failed. Overflows are
	// counted when the session ends.
	Dropped uint64 `json:"dropped"`
	// DroppedBy splits Dropped by reason: "overflow" (the socket toward
	// the client), "from_target" (the socket toward the target: its
	// kernel dropped them), "to_target", "to_client" (a write that
	// failed). Reasons that never happened are left out.
	DroppedBy map[string]uint64 `json:"dropped_by,omitempty"`
	// Waits counts UDP datagrams the path held back (Inject waited)
	// until their session's socket toward the client had room:
	// backpressure instead of a drop.
	Waits uint64 `json:"waits"`
	// Active is the number of connections or sessions open now.
	Active int64 `json:"active"`
	// BytesUp counts payload bytes from clients toward targets (or into
	// the services), BytesDown payload bytes back to clients.
	BytesUp   uint64 `json:"bytes_up"`
	BytesDown uint64 `json:"bytes_down"`
}
