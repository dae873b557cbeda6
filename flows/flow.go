package flows

import (
	"context"
	"net"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/stats"
)

// Flow is a traffic flow as the emulator drives it: Run it, Sample it on the
// emulator's schedule while it runs, and Summarize it at the end. *TCPBulk
// and *UDPFlow implement it.
type Flow interface {
	// Name returns the flow's name, unique within a run.
	Name() string
	// Run runs the flow to its end; it may be called once.
	Run(ctx context.Context) error
	// Sample returns the flow's cumulative counters, stamped with now.
	Sample(now time.Time) Sample
	// Summary returns what the flow measured so far.
	Summary() FlowSummary
}

var (
	_ Flow = (*TCPBulk)(nil)
	_ Flow = (*UDPFlow)(nil)
)

// The values of Sample.Type and FlowSummary.Type.
const (
	TypeTCP = "tcp"
	TypeUDP = "udp"
)

// Sample is a snapshot of a flow's cumulative counters for the time series.
// Counters only grow, so the difference of two samples is what happened
// between them (see Series).
type Sample struct {
	// Time is the time the sample was taken, as passed to Flow.Sample.
	Time time.Time
	// Type is TypeTCP or TypeUDP.
	Type string
	// Bytes is the payload delivered to the receiver so far: bytes read
	// (TCP) or bytes of the unique, well-formed datagrams received (UDP).
	Bytes uint64
	// Packets is the number of unique, well-formed datagrams received
	// (UDP); 0 for TCP.
	Packets uint64
	// DelaySum is the sum of the one-way delays of those Packets (UDP),
	// so that the mean delay over an interval is a difference quotient.
	DelaySum time.Duration
	// Cwnd (segments) and SRTT are the sender's latest TCPInfo (TCP);
	// zero until the first one is taken, and without an info function.
	Cwnd uint32
	SRTT time.Duration
}

// FlowSummary is what summary.json prints for one flow. Exactly one of
// TCPSummary and UDPSummary is set, according to Type; their fields appear
// inline in the JSON, and those of the other type not at all.
type FlowSummary struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Stack and CC name the network stack and congestion control the
	// flow ran on. The emulator fills them; the flow does not know.
	Stack string `json:"stack,omitempty"`
	CC    string `json:"cc,omitempty"`
	// Path names the path the flow crossed, in a scenario of several
	// links (links:); the emulator fills it.
	Path string `json:"path,omitempty"`
	// ThroughputBps is the payload bit rate received, in bit/s, over the
	// interval in which the flow's data arrived: the bytes received after
	// the first arrival (a TCP read, a UDP datagram), over the time from
	// the first arrival to the last (see arrivalRate). The flows of a run
	// that overlap in time thus add up to no more than the path carried
	// in the interval; what arrived after the sender stopped is in it,
	// and reported on its own (BytesAfterStop). A TCP flow whose data
	// came in one read reports its bytes over the time from its first
	// write instead. The same definition for TCP and UDP, as ns-3's
	// FlowMonitor has (rxBytes over the first-to-last received packet).
	ThroughputBps float64 `json:"throughput_bps"`
	// BytesAfterStop is the payload that arrived after the sender
	// stopped (TCP: wrote its last byte into the socket, at the
	// duration's end or the size's; UDP: sent its last datagram): the
	// send buffer and the path's queues draining. It is part of
	// ThroughputBps's interval.
	BytesAfterStop uint64 `json:"bytes_after_stop"`
	*TCPSummary
	*UDPSummary
}

// TCPSummary is the part of a FlowSummary specific to TCP. The fields
// from TCPInfo are zero when the flow has no info function.
type TCPSummary struct {
	BytesSent     uint64 `json:"bytes_sent"`
	BytesReceived uint64 `json:"bytes_received"`
	// Size is the number of bytes the flow was to move; absent for a flow
	// bounded by a duration.
	Size uint64 `json:"size,omitempty"`
	// Completed is whether the receiver got everything: Size bytes, or,
	// for a flow bounded by a duration, the sender's end of stream. A
	// flow the run's end cut short has Completed false, no CompletionS,
	// and BytesReceived of Size says how far it got.
	Completed bool `json:"completed"`
	// CompletionS is the time from the flow's start to the last byte
	// read, in seconds, set once the receiver has everything: Size bytes,
	// or, for a flow bounded by Duration, everything up to the sender's
	// end of stream. Absent for a flow that did not complete.
	CompletionS float64 `json:"completion_s,omitempty"`
	// ConnectS is the handshake's time, from the first SYN to the
	// connection established at the sender (curl's time_connect), lost
	// SYNs and their timeouts included; TotalS is ConnectS plus
	// CompletionS (curl's time_total), absent when CompletionS is.
	ConnectS float64 `json:"connect_s"`
	TotalS   float64 `json:"total_s,omitempty"`
	// Retransmissions, FastRetransmits and Timeouts are the sender's
	// counters in its last TCPInfo.
	Retransmissions uint64 `json:"retransmissions"`
	FastRetransmits uint64 `json:"fast_retransmits"`
	Timeouts        uint64 `json:"timeouts"`
	// RTTMs is the distribution of the sender's smoothed RTT, sampled
	// every TCPBulkSpec.InfoInterval while the flow ran, in milliseconds.
	RTTMs stats.Summary `json:"rtt_ms"`
	// CwndMax is the largest congestion window sampled, in segments.
	CwndMax uint32 `json:"cwnd_max"`
	// Stalls counts the intervals in which the sender had data to send
	// and sent nothing, not even a retransmission, for longer than
	// StallThreshold; StalledS is their total length in seconds, each
	// from the last segment sent before it to the first one after it (or
	// to the flow's end). Both are 0 for a healthy TCP, whatever the path
	// does; a stall is the sending stack's defect (see Stall).
	Stalls   int     `json:"stalls"`
	StalledS float64 `json:"stalled_s"`
	// ResetAtS is when a timeline's reset ended the connection, in
	// seconds from the flow's start; absent when none did. Such a flow
	// has not Completed.
	ResetAtS float64 `json:"reset_at_s,omitempty"`
}

// UDPSummary is the part of a FlowSummary specific to UDP. See UDPFlow for
// the definitions.
type UDPSummary struct {
	PacketsSent     uint64 `json:"packets_sent"`
	PacketsReceived uint64 `json:"packets_received"`
	// Lost counts the datagrams sent that did not arrive; InFlight, those
	// still on their way when the flow was cut short (interrupted, cut
	// by the run's end, or still running): the ones sent after the
	// highest one received. A datagram a queue dropped at the tail is
	// among them: the receiver cannot tell it from one still queued.
	// Once the flow waited for the stragglers to the end, nothing is in
	// flight.
	// LossRatio is Lost / sent; 0 when nothing was sent.
	Lost      uint64  `json:"lost"`
	InFlight  uint64  `json:"in_flight,omitempty"`
	LossRatio float64 `json:"loss_ratio"`
	// ReceiverDrops counts the datagrams that crossed the path and that
	// the receiving socket dropped, its buffer full because the machine
	// could not read them in time: netjam's own, not the path's, and not
	// in Lost (see ReceiveDropper).
	ReceiverDrops uint64 `json:"receiver_drops,omitempty"`
	// BytesAfterStop is the payload that arrived after the sender's
	// last datagram: the queues draining.
	BytesAfterStop uint64  `json:"bytes_after_stop"`
	JitterMs       float64 `json:"jitter_ms"`
	Reordered      uint64  `json:"reordered"`
	Duplicates     uint64  `json:"duplicates"`
	Malformed      uint64  `json:"malformed"`
	// SendErrors counts datagrams whose Write failed; they are not in
	// PacketsSent. Absent when zero.
	SendErrors uint64 `json:"send_errors,omitempty"`
	// DelayMs is the one-way delay of the unique datagrams received, in
	// milliseconds.
	DelayMs stats.Summary `json:"delay_ms"`
}

// nsPerMs turns nanosecond summaries into milliseconds.
const nsPerMs = 1e-6

// bitRate returns bytes*8 per d in bit/s, or 0 when d is not positive. It
// divides by nanoseconds rather than by seconds so that round numbers stay
// exact.
func bitRate(bytes uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 * 1e9 / float64(d)
}

// arrivalRate is the rate at which data arrived at a receiver: the bytes
// that arrived after the first arrival, over the time from the first
// arrival to the last (first and last in ns on any common origin; first
// negative when nothing arrived). The first arrival's own bytes (firstBytes)
// are left out: they crossed the path before the interval began, and
// counting them would let flows that each got one read in add up to more
// than the path carried. This is ns-3 FlowMonitor's definition without
// that overcount, and it gives a lossless constant-rate flow at constant
// delay exactly its rate. With a single arrival it is 0.
func arrivalRate(bytes, firstBytes uint64, first, last int64) float64 {
	if first < 0 || last <= first || bytes < firstBytes {
		return 0
	}
	return bitRate(bytes-firstBytes, time.Duration(last-first))
}

// longAgo is a deadline in the past under any clock: setting it unblocks a
// pending Read or Write at once, as net/http does to abort connections.
var longAgo = time.Unix(1, 0)

// stopWrites makes c's pending and future writes fail at once; if c does
// not take deadlines it is closed instead.
func stopWrites(c net.Conn) {
	if c.SetWriteDeadline(longAgo) != nil {
		c.Close()
	}
}

// readCloser is the part of net.Conn and net.PacketConn stopReads uses.
type readCloser interface {
	SetReadDeadline(time.Time) error
	Close() error
}

// stopReads makes c's pending and future reads fail at once; if c does not
// take deadlines it is closed instead.
func stopReads(c readCloser) {
	if c.SetReadDeadline(longAgo) != nil {
		c.Close()
	}
}

// halfClose ends the stream c sends: CloseWrite when c has it (TCP), so the
// peer reads EOF while the connection stays open for ACKs and TCP_INFO,
// else Close.
func halfClose(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// whenDone runs f on its own goroutine once ctx is done, like
// context.AfterFunc, and returns a function that cancels f or, if f has
// started, waits for it to return, so that no goroutine outlives the
// caller. The returned function must be called exactly once.
func whenDone(ctx context.Context, f func()) (stop func()) {
	done := make(chan struct{})
	cancel := context.AfterFunc(ctx, func() {
		defer close(done)
		f()
	})
	return func() {
		if !cancel() {
			<-done
		}
	}
}

// sleeper is one reusable clock timer, created at its first use so that no
// timer is ever armed that the owner does not wait for (a manual clock's
// Next would report it). It belongs to one goroutine.
type sleeper struct {
	clk clock.Clock
	t   clock.Timer
}

// arm makes the timer fire d from now and returns its channel.
func (s *sleeper) arm(d time.Duration) <-chan time.Time {
	if s.t == nil {
		s.t = s.clk.NewTimer(d)
	} else {
		s.t.Reset(d)
	}
	return s.t.C()
}

// stop disarms the timer, if any.
func (s *sleeper) stop() {
	if s.t != nil {
		s.t.Stop()
	}
}

// sleepUntil waits on s until the clock reaches t or ctx is done, and
// returns ctx.Err() in the latter case.
func (s *sleeper) sleepUntil(ctx context.Context, t time.Time) error {
	d := t.Sub(s.clk.Now())
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-s.arm(d):
		return nil
	case <-ctx.Done():
		s.stop()
		return ctx.Err()
	}
}
