package stack

import (
	"fmt"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv4"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv6"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/stack"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/icmp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/tcp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/udp"
)

// This file holds every netstack tuning choice of a Host, each with the
// reason for it. The aim is an end host that behaves like a stock Linux
// one, since that is what the emulated path is meant to be tested with,
// and that is not the bottleneck of an unimpaired path.

// defaultCC is the congestion control of a connection whose
// hostcfg.TCPOptions.CC is empty. gVisor's own default is "reno"; Linux's
// (and so what a real host on the far side of a real link would run) is
// "cubic".
const defaultCC = "cubic"

// TCP buffer ranges (Linux's net.ipv4.tcp_rmem and tcp_wmem: min, default,
// max). A connection starts at the default and, unless hostcfg.TCPOptions
// pins a size, gVisor grows it by auto-tuning up to the max.
//
// The defaults are gVisor's (1 MiB; Linux starts smaller, 128 KiB and
// 16 KiB, but auto-tunes within a few round trips anyway). The maxima are
// above Linux's (6 MiB and 4 MiB): gVisor, like Linux with
// tcp_adv_win_scale=1, advertises half its receive buffer as window, and an
// emulated path is often a long fat one (100 Mbit/s at 200 ms RTT is a
// 2.5 MB BDP; 1 Gbit/s at 100 ms is 12.5 MB), where a 3 MiB window would
// make the host, not the path, the limit. 32 MiB covers 1 Gbit/s at about
// 130 ms; memory is only taken as a connection actually grows.
//
// Measured with BenchmarkTCPThroughput (in memory, RTT about 1 ms): Linux's
// defaults, these, 4 MiB defaults and a 4 MiB max all give the same
// throughput within the machine's noise; the max only matters on long fat
// paths, the defaults not at all once auto-tuning has run.
var (
	tcpReceiveBuffer = tcpip.TCPReceiveBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: 1 << 20, Max: 32 << 20}
	tcpSendBuffer    = tcpip.TCPSendBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: 1 << 20, Max: 32 << 20}
)

// First buffer sizes of the relay's served and relayed connections
// (relay_buffers.go), which grow from there under the relay's budget
// instead of by gVisor's auto-tuning. They are Linux's first sizes in
// spirit: the receive buffer is tcp_rmem's default (128 KiB: a 64 KiB
// window, what the SYN-ACK offered already, so nothing advertised is taken
// back), the send buffer twice an initial window of segments, which is
// where Linux's tcp_sndbuf_expand starts (tcp_wmem's 16 KiB default is
// raised to it at once). A connection that never reads holds no more than
// these, about 160 KiB, instead of gVisor's 2 MiB.
const (
	relayReceiveInitial = 128 << 10
	relaySendInitial    = 32 << 10
	// tcpHeaderRoom is what an IPv4 packet's MTU holds besides a
	// segment's payload in gVisor: 20 bytes of IP header, 20 of TCP
	// header and the 40 of options it always reserves (see the end of
	// this file). IPv6's 20 more bytes are left out: sizes are rounded.
	tcpHeaderRoom = 80
	// relayRTTUnknown is the round trip a relayed connection's receive
	// buffer is grown over until gVisor has measured one (a connection
	// whose client sent no timestamps and got no data has none): longer
	// than the unimpaired round trip through TUN mode, so the growth errs
	// on the large side, which the budget bounds.
	relayRTTUnknown = 10 * time.Millisecond
)

// Socket buffer ranges of the other transports (Linux's net.core.rmem_*
// and wmem_*), used by UDP and ICMP endpoints. gVisor's defaults equal
// Linux's (212992 bytes by default, 4 MiB max), which is what a UDP
// application tested over the emulator would get on a real host.
var (
	socketReceiveBuffer = tcpip.ReceiveBufferSizeOption{Min: stack.MinBufferSize, Default: stack.DefaultBufferSize, Max: stack.DefaultMaxBufferSize}
	socketSendBuffer    = tcpip.SendBufferSizeOption{Min: stack.MinBufferSize, Default: stack.DefaultBufferSize, Max: stack.DefaultMaxBufferSize}
)

// defaultTTL is the TTL of IPv4 packets and the hop limit of IPv6 ones:
// Linux's 64 (also gVisor's default; set so it is stated).
const defaultTTL = 64

// protocols returns the protocols a Host runs.
//
// ICMPv4 and ICMPv6 are registered as transports so that ping-like probes
// (ICMP echo endpoints) can be opened later; echo requests are answered by
// the network layer either way.
//
// IPv6 runs without duplicate address detection, router solicitation,
// SLAAC, a link-local address or MLD (the zero ipv6.Options): the NIC is a
// point-to-point link to the path, there is no router or neighbour to talk
// to, and that chatter would take room in the path's queues and show up in
// its counters. DAD would also hold every address tentative for a second
// after NewHost. IGMP is off for the same reason (zero ipv4.Options).
func protocols() (nets []stack.NetworkProtocolFactory, transports []stack.TransportProtocolFactory) {
	nets = []stack.NetworkProtocolFactory{
		ipv4.NewProtocolWithOptions(ipv4.Options{}),
		ipv6.NewProtocolWithOptions(ipv6.Options{}),
	}
	transports = []stack.TransportProtocolFactory{
		tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6,
	}
	return nets, transports
}

// tune applies the stack-wide settings to a new stack.
func tune(s *stack.Stack, sack bool) error {
	for _, st := range append(tcpSettings(s, sack), stackSettings(s)...) {
		if err := st.set(); err != nil {
			return fmt.Errorf("stack: setting %s: %s", st.name, err)
		}
	}
	// Not set, deliberately:
	//   - forwarding stays off (gVisor's default): a Host is an end host.
	//   - no GRO: a host with OutputGSO sends large segments (host
	//     GSO, see HostConfig), which the path splits where a stage
	//     decides per packet; gVisor's own GRO, merging what arrives,
	//     halved its TCP's ACK clocking (see docs/accuracy.md).
	//   - TIME_WAIT (60 s), SYN retries (6), keepalive and the ICMP rate
	//     limit (1000/s, echo replies exempt) keep gVisor's defaults,
	//     which are Linux's.
	return nil
}

// setting is one option tune sets, named for its error.
type setting struct {
	name string
	set  func() tcpip.Error
}

// tcpSettings are the TCP protocol's options, each with why it is set.
func tcpSettings(s *stack.Stack, sack bool) []setting {
	tcpOpt := func(o tcpip.SettableTransportProtocolOption) func() tcpip.Error {
		return func() tcpip.Error { return s.SetTransportProtocolOption(tcp.ProtocolNumber, o) }
	}
	sackOpt := tcpip.TCPSACKEnabled(sack)
	// RACK-TLP (RFC 8985) on, as on Linux (and gVisor's default): a lost
	// retransmission, or a loss in a window too small for three
	// duplicate ACKs, is repaired after about one RTT (a tail loss probe
	// at 2 SRTT, then RACK's time-based marking) instead of the 200 ms
	// minimum RTO. Measured on the issue-13 scenario (CUBIC, 10 ms RTT,
	// 5% loss on the data direction, 10 s; docs/measurements.md): RACK
	// off, 22-30 RTOs and 2.0-2.9 Mbit/s; RACK on, 0-6 RTOs and
	// 3.7-4.3 Mbit/s (reno: 5.8-6.4). ooni/netem's 8-9 Mbit/s on the same
	// stack come from gVisor's defaults, RACK and SACK on.
	//
	// RACK was off here because it "stalled" a SACK recovery (TestTCPLossy
	// with a congestion window of 0 and no timer armed, and the 0.4 Mbit/s
	// runs of the issue-13 scenario). That was not RACK's: gVisor's CUBIC
	// let an ACK lower the window, down to 0 once it was below 2 (the
	// window's target W_cubic(t+RTT) sat below cwnd right after a
	// recovery, and each ACK moved cwnd towards it). With nothing in
	// flight and a window of 0 no segment and no timer is ever sent
	// again. gVisor fixed it in google/gvisor#13958 (August 2026, "tcp:
	// prevent CUBIC ACKs from reducing cwnd"; the window of 0 is the one
	// of gvisor#6113); go.mod requires a gVisor with the fix. flows.Stall
	// detects a stall should another appear.
	//
	// What remains of RACK's known weakness: it has no undo of spurious
	// recoveries (DSACK/Eifel are detected, then ignored), so a path that
	// reorders makes it halve the window for nothing (gvisor#9778,
	// gvisor#14102; tailscale turned RACK off in tailscale#14896 for
	// this). A path with jitter but no reordering (netjam keeps a
	// direction's packets in order unless reorder is set) does not.
	recovery := tcpip.TCPRACKLossDetection
	// Receive buffer auto-tuning (Linux's tcp_moderate_rcvbuf=1, also
	// gVisor's default): a connection's window follows its bandwidth-delay
	// product up to tcpReceiveBuffer.Max instead of sitting at the default.
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	// Nagle on for new sockets, as on Linux (gVisor defaults to off). Bulk
	// transfers do not notice (measured: same throughput within noise);
	// small-write applications see the real coalescing they would see on
	// Linux, and its meeting with the receiver's delayed ACK (netjam's
	// gVisor acknowledges every second full-sized segment and delays a
	// lone one by 40 ms, unless the application reads it first, as
	// Linux's: third_party/gvisor/patches/0024).
	nagle := tcpip.TCPDelayEnabled(true)
	cc := tcpip.CongestionControlOption(defaultCC)
	// Retransmission timer bounds, Linux's: 200 ms minimum, 120 s maximum.
	// gVisor's defaults are the same; stated because RTO is what a lossy
	// emulated path exercises most.
	minRTO := tcpip.TCPMinRTOOption(tcp.MinRTO)
	maxRTO := tcpip.TCPMaxRTOOption(tcp.MaxRTO)
	rcv, snd := tcpReceiveBuffer, tcpSendBuffer
	return []setting{
		{"tcp sack", tcpOpt(&sackOpt)},
		{"tcp recovery", tcpOpt(&recovery)},
		{"tcp moderate receive buffer", tcpOpt(&moderate)},
		{"tcp delay (nagle)", tcpOpt(&nagle)},
		{"tcp congestion control", tcpOpt(&cc)},
		{"tcp min rto", tcpOpt(&minRTO)},
		{"tcp max rto", tcpOpt(&maxRTO)},
		{"tcp receive buffer range", tcpOpt(&rcv)},
		{"tcp send buffer range", tcpOpt(&snd)},
	}
}

// stackSettings are the stack-wide and IP options. They are set by value,
// not by pointer as the protocol ones are (gVisor rejects a pointer here
// with ErrUnknownProtocolOption); the TTL goes to both IP protocols by
// pointer, as they want it.
func stackSettings(s *stack.Stack) []setting {
	ttl := tcpip.DefaultTTLOption(defaultTTL)
	return []setting{
		{"socket receive buffer range", func() tcpip.Error { return s.SetOption(socketReceiveBuffer) }},
		{"socket send buffer range", func() tcpip.Error { return s.SetOption(socketSendBuffer) }},
		{"ipv4 ttl", func() tcpip.Error { return s.SetNetworkProtocolOption(ipv4.ProtocolNumber, &ttl) }},
		{"ipv6 hop limit", func() tcpip.Error { return s.SetNetworkProtocolOption(ipv6.ProtocolNumber, &ttl) }},
	}
}

// Differences from Linux that no option changes, for whoever compares a
// run with a real host:
//   - Segment size: gVisor reserves room for the largest TCP options
//     (40 bytes) in every segment, so a 1500-byte IPv4 link carries 1420
//     bytes of data per segment in 1472-byte packets (Linux: 1448 in 1500).
//   - RTO is max(SRTT + 4*RTTVAR, 200 ms); Linux floors the variance term
//     instead, so its RTO is about SRTT + 200 ms. SRTT is floored at 1 ms
//     (tcp.MinSRTT).
//   - No limited transmit (RFC 3042) or early retransmit (RFC 5827): a
//     loss in a window of fewer than four segments waits for RACK's tail
//     loss probe (about 2 SRTT).
//   - Delayed ACKs as Linux's (every second full-sized segment, quickack
//     mode at the start and after a pause, 40 ms for a lone segment), but
//     a fixed delay (Linux adapts it between 40 and 200 ms) and no
//     interactive ("pingpong") mode.
//   - Accepted connections inherit neither the listener's congestion
//     control nor its receive buffer lock; tcp.go sets both again.
