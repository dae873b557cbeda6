package stack

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/hostcfg"
)

// How a Relay applies its configuration (hostcfg.RelayConfig): its limits
// and defaults, and its live counters (hostcfg.RelayStats). The relay's
// design is described in relay.go.

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
	// udpArena is what the up direction of a UDP session reads a batch
	// into: room for the largest datagram always, and for 46 of 1400
	// bytes before it writes them.
	udpArena = 2 * udpBuffer
	// udpBatchLen bounds the datagrams of one batch (one sendmmsg).
	udpBatchLen = 64
	// udpCharge is what a UDP session takes of the budget: its up
	// direction's arena and its down direction's datagram buffer, held
	// while it waits.
	udpCharge = udpArena + udpBuffer
	// udpAdmitWait bounds how long Inject waits for a UDP session's
	// socket to have room (see udpSession.admit): as an inbox waits for
	// its host, far longer than a session busy with a burst takes, short
	// enough that a stuck one does not stop the path.
	udpAdmitWait = 100 * time.Millisecond
	// echoBuffer is the most the TCP echo service holds between reading
	// and writing back, per connection (see echoTCP for why it holds
	// any); its ring starts at echoInitial bytes and doubles when full, so
	// an idle or interactive connection holds little.
	echoBuffer  = 4 << 20
	echoInitial = 16 << 10
)

// Service ports (hostcfg.EchoPort, hostcfg.DiscardPort).
const (
	echoPort    = hostcfg.EchoPort
	discardPort = hostcfg.DiscardPort
)

// fillDefaults sets every zero field that has a default to it.
func fillDefaults(c *hostcfg.RelayConfig) {
	if c.UDPIdle == 0 {
		c.UDPIdle = hostcfg.DefaultUDPIdle
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = hostcfg.DefaultDialTimeout
	}
	if c.TCPIdle == 0 {
		c.TCPIdle = hostcfg.DefaultTCPIdle
	}
	if c.Budget == 0 {
		c.Budget = hostcfg.DefaultBudget
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: c.DialTimeout}
		c.Dial = d.DialContext
	}
}

// relayCounters are one protocol's live counters.
type relayCounters struct {
	relayed, served, refused, noService, limited, overBudget, idle, dialErrors, resets, errors, dropped, waits atomic.Uint64
	active                                                                                                     atomic.Int64
	up, down                                                                                                   atomic.Uint64
	refusedBy                                                                                                  [nRefusals]atomic.Uint64
	droppedBy                                                                                                  [nUDPDrops]atomic.Uint64
}

// udpDrop is why the relay dropped a UDP datagram.
type udpDrop int

const (
	dropOverflow   udpDrop = iota // the socket toward the client was full
	dropToTarget                  // the write to the target failed
	dropToClient                  // the write to the client failed
	dropFromTarget                // the socket toward the target was full
	nUDPDrops
)

func (d udpDrop) String() string {
	return [...]string{"overflow", "to_target", "to_client", "from_target"}[d]
}

// drop counts n datagrams dropped for why.
func (c *relayCounters) drop(why udpDrop, n uint64) {
	if n > 0 {
		c.dropped.Add(n)
		c.droppedBy[why].Add(n)
	}
}

// refuse counts a refusal for why.
func (c *relayCounters) refuse(why refusal) {
	c.refused.Add(1)
	c.refusedBy[why].Add(1)
}

func (c *relayCounters) snapshot() hostcfg.RelayCounters {
	var by map[string]uint64
	for why := range c.refusedBy {
		if n := c.refusedBy[why].Load(); n > 0 {
			if by == nil {
				by = make(map[string]uint64)
			}
			by[refusal(why).String()] = n
		}
	}
	var dby map[string]uint64
	for why := range c.droppedBy {
		if n := c.droppedBy[why].Load(); n > 0 {
			if dby == nil {
				dby = make(map[string]uint64)
			}
			dby[udpDrop(why).String()] = n
		}
	}
	return hostcfg.RelayCounters{RefusedBy: by, DroppedBy: dby, Waits: c.waits.Load(),
		Relayed: c.relayed.Load(), Served: c.served.Load(), Refused: c.refused.Load(),
		NoService: c.noService.Load(), Limited: c.limited.Load(), OverBudget: c.overBudget.Load(), Idle: c.idle.Load(), DialErrors: c.dialErrors.Load(),
		Resets: c.resets.Load(), Errors: c.errors.Load(), Dropped: c.dropped.Load(), Active: c.active.Load(), BytesUp: c.up.Load(), BytesDown: c.down.Load(),
	}
}
