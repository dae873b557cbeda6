package stack

import (
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/tcp"
)

// The socket buffers of the relay's connections, as Linux's tcp_mem sees
// them: every byte a client can make netjam hold is in the relay's one
// budget. gVisor sizes a connection's send and receive buffers by itself
// (1 MiB each from the start, growing by auto-tuning to 32 MiB), and no
// limit across connections bounds them: 1000 echo connections that never
// read held 2 GB. A served or relayed connection therefore starts with
// small buffers (relaySendInitial, relayReceiveInitial), charged to the
// budget when it is admitted, and its buffers grow only as the relay
// grows them, by the rules of gVisor's auto-tuning, each growth charged
// to the budget first and refused under pressure (budget.grow): a
// connection that moves data fast gets the buffers its path needs, one
// that stalls keeps what it has, and the budget bounds the sum.

// tcpBuffers sizes the gVisor buffers of one served or relayed
// connection. The send half is used only by the goroutine that writes the
// connection, the receive half only by the one that reads it; release is
// called once both have ended.
type tcpBuffers struct {
	ep     tcpip.Endpoint
	budget *budget
	mss    int // the segment size the host's MTU allows

	snd int64 // the send buffer's size

	rcv    int64         // the receive buffer's size
	rtt    time.Duration // the round trip the receive side measures over
	since  time.Time     // when the current measurement began
	copied int           // bytes read since then
	prev   int           // bytes read in the measurement that last grew the buffer

	// GetSockOpt's answers, here so that asking allocates nothing: one for
	// each half, whose goroutines ask at the same time.
	sndInfo, rcvInfo tcpip.TCPInfoOption
}

// newTCPBuffers sets ep's buffers to their first sizes, which the caller
// has charged to b (tcpCharge), and turns gVisor's auto-tuning of them
// off: from now on only the relay grows them. The window scale was agreed
// in the handshake, from the largest buffer, so a buffer can still grow
// to tcpReceiveBuffer.Max.
func newTCPBuffers(ep tcpip.Endpoint, b *budget, mtu uint32) *tcpBuffers {
	mss := max(int(mtu)-tcpHeaderRoom, 536)
	// prev starts where gVisor's does, at the window its SYN-ACK offers
	// (two initial windows of segments): a first round trip that brings
	// more grows the buffer. Starting at the window the buffer offers
	// would grow it only when a measurement happened to span more than a
	// round trip's data.
	t := &tcpBuffers{ep: ep, budget: b, mss: mss,
		snd: relaySendInitial, rcv: relayReceiveInitial, rtt: relayRTTUnknown, prev: 2 * tcp.InitialCwnd * mss}
	ops := ep.SocketOptions()
	ops.SetSendBufferSize(t.snd, true)
	ops.SetReceiveBufferSize(t.rcv, true)
	t.since = time.Now()
	return t
}

// sendFull grows the send buffer when a write found it full, to twice
// what the congestion window sends in a round trip (gVisor's and Linux's
// rule, tcp_sndbuf_expand), if the budget grants the growth. A client
// that stopped reading lets the window grow no further (the sender is
// not limited by it), so its buffer stays where it was.
func (t *tcpBuffers) sendFull() {
	if t.ep.GetSockOpt(&t.sndInfo) != nil {
		return
	}
	want := min(int64(2*max(int(t.sndInfo.SndCwnd), tcp.InitialCwnd)*t.mss), int64(tcpSendBuffer.Max))
	if want <= t.snd || !t.budget.grow(want-t.snd) {
		return
	}
	t.snd = want
	t.ep.SocketOptions().SetSendBufferSize(want, true) // wakes the writer's waiter
}

// received counts n bytes read and, once a round trip has passed, grows
// the receive buffer as gVisor's auto-tuning would (Endpoint.ModerateRecvBuf,
// Linux's tcp_rcv_space_adjust): to twice what was read in the last round
// trip, more while that grows, if the budget grants it. A reader that
// stopped reading (an echo whose client reads nothing, a target that
// takes nothing) reads nothing per round trip, and its buffer stays.
func (t *tcpBuffers) received(n int) {
	t.copied += n
	now := time.Now()
	if now.Sub(t.since) < t.rtt {
		return
	}
	copied := t.copied
	t.since, t.copied = now, 0
	if t.ep.GetSockOpt(&t.rcvInfo) == nil && t.rcvInfo.RTT > 0 {
		t.rtt = t.rcvInfo.RTT
	}
	if copied <= t.prev {
		return
	}
	// gVisor's formula: twice what was read, room for 16 more segments,
	// and twice the growth since the last measurement for a sender in
	// slow start; at least twice an initial window.
	want := 2*copied + 16*t.mss
	want += 2 * (want * (copied - t.prev) / t.prev)
	want = max(want, 2*tcp.InitialCwnd*t.mss)
	w := min(int64(want), int64(tcpReceiveBuffer.Max))
	t.prev = copied
	if w <= t.rcv || !t.budget.grow(w-t.rcv) {
		return
	}
	t.rcv = w
	t.ep.SocketOptions().SetReceiveBufferSize(w, true) // announces the wider window
}

// release gives back what the buffers grew by; their first sizes are the
// caller's charge.
func (t *tcpBuffers) release() {
	t.budget.give(t.snd - relaySendInitial + t.rcv - relayReceiveInitial)
}
