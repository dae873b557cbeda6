package stack

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/adapters/gonet"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/udp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/waiter"
	"go.uber.org/zap"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// The relay's UDP: a session for each client address and destination,
// decided on the goroutine that delivers its first datagram and carried on
// a goroutine of its own until it has been idle for UDPIdle.
//
// Toward the target, a session reads every datagram its endpoint holds
// (without a wake-up while any is queued) and writes them with one
// sendmmsg. Its endpoint's receive buffer is the only queue between the
// path and the relay, and gVisor drops what does not fit; so the host's
// Inject waits (admit) while a session's buffer could not take the next
// datagram, as a full NIC ring stops the queue in front of it: a path
// with no reason to drop loses nothing in the relay, and when more
// arrives than the machine carries the path's own backpressure sheds it
// at the entrance, before any work is done on it.

// relayUDP is a UDP socket of the relay on the host, closed exactly once.
type relayUDP struct {
	*gonet.UDPConn
	ep   tcpip.Endpoint
	wq   *waiter.Queue
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
	in := &relayUDP{UDPConn: gonet.NewUDPConn(&wq, ep), ep: ep, wq: &wq}
	if !r.keep(in) {
		r.udpN.active.Add(-1)
		r.budget.give(udpCharge)
		return true
	}
	u := r.newUDPSession(in, udpKey{src, dst}, target)
	r.wg.Add(1) // this handler holds a count: Add is safe
	go r.runUDPSession(u)
	return true
}

// runUDPSession relays one UDP session: datagrams from the client (queued in
// its endpoint, starting with the first) to a host socket connected to its
// target, and datagrams from the target back, until neither way has carried
// a datagram for UDPIdle, or Close.
func (r *Relay) runUDPSession(u *udpSession) {
	defer r.wg.Done()
	defer r.udpN.active.Add(-1)
	defer r.budget.give(udpCharge)
	defer r.forget(u)
	out, err := r.dial("udp", u.target)
	if err != nil {
		r.udpN.dialErrors.Add(1)
		r.log.Debug("udp dial failed", zap.Stringer("dst", u.target), zap.Error(err))
		r.release(u.in)
		return
	}
	tc := newTargetConn(r, out)
	if !r.keep(tc) {
		r.release(u.in)
		return
	}
	r.udpN.relayed.Add(1)
	u.out = tc
	u.batch = batchWriterOf(out)
	u.segMax = tc.segMax
	r.wg.Add(1)
	go u.down()
	u.up()
	r.release(u.in, tc)
	u.end()
}

// udpKey names a session as the relay's host sees it: the client's
// address and the destination it sent to.
type udpKey struct{ src, dst netip.AddrPort }

// udpSession is one relayed UDP session: the client's socket and the
// target's, and what both directions share. Its up direction runs on the
// session's goroutine, its down direction on one of its own.
type udpSession struct {
	r      *Relay
	key    udpKey
	in     *relayUDP // the client's side
	out    net.Conn  // the target's
	batch  batchWriter
	segMax int         // the largest datagram the target's socket segments; 0: none (up direction's)
	hdr    *downHeader // the down direction's headers; nil: gVisor sends
	target netip.AddrPort
	start  time.Time
	last   atomic.Int64 // the last datagram either way, in nanoseconds since start (monotonic)
	// downDone is closed when the down direction ends (the target's
	// socket failed or closed); gone when the session ends.
	downDone, gone chan struct{}
	dropped        atomic.Uint64
	// Failures are logged once per session, with the first cause and
	// the count, not once per datagram.
	firstErr atomic.Pointer[error]

	// What admit needs: the client endpoint's counters and receive
	// buffer, the datagrams read from it, the largest datagram seen.
	st      *tcpip.TransportEndpointStats
	rcvBuf  int64
	read    atomic.Uint64
	maxLen  atomic.Int64
	waiting atomic.Bool   // an admit waits for room
	room    chan struct{} // the up direction made room (one token)
	stuck   atomic.Uint64 // read+taken+1 when an admit gave up waiting: no more waits until a read
	// The fast path's: the queue (nil until the first fast datagram,
	// r.deadQ once the session ended), the datagrams the up direction
	// took from it, and the token that wakes the up direction when the
	// queue stops being empty.
	q     atomic.Pointer[udpQueue]
	taken atomic.Uint64
	wake  chan struct{}
	// targetFull: the target's socket was full and the up direction
	// waits for it; admit does not wait meanwhile.
	targetFull atomic.Bool
}

// newUDPSession returns the session of in and registers it for admit.
func (r *Relay) newUDPSession(in *relayUDP, key udpKey, target netip.AddrPort) *udpSession {
	u := &udpSession{r: r, key: key, in: in, target: target, start: time.Now(),
		downDone: make(chan struct{}), gone: make(chan struct{}), room: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		rcvBuf: in.ep.SocketOptions().GetReceiveBufferSize()}
	u.st, _ = in.ep.Stats().(*tcpip.TransportEndpointStats)
	r.swapSessions(func(m map[udpKey]*udpSession) { m[key] = u })
	return u
}

// swapSessions replaces the sessions' map by a copy that change changed.
func (r *Relay) swapSessions(change func(map[udpKey]*udpSession)) {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	old := *r.sessions.Load()
	m := make(map[udpKey]*udpSession, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	change(m)
	r.sessions.Store(&m)
	r.sessN.Store(int64(len(m)))
}

// forget unregisters u once it ended, and releases an admit waiting on
// it.
func (r *Relay) forget(u *udpSession) {
	r.swapSessions(func(m map[udpKey]*udpSession) {
		if m[u.key] == u {
			delete(m, u.key)
		}
	})
	if q := u.q.Swap(r.deadQ); q != nil && q != r.deadQ {
		// What the fast path queued and the up direction never wrote:
		// the session ended (the relay closed, the target's socket
		// failed) with them inside.
		r.udpN.drop(dropToTarget, uint64(q.close()))
		r.budget.give(udpQueueBytes)
	}
	close(u.gone)
}

// touch marks the session busy now.
func (u *udpSession) touch() { u.last.Store(int64(time.Since(u.start))) }

// drop counts a datagram lost on its way (why) and keeps the first cause.
func (u *udpSession) drop(why udpDrop, err error) { u.dropN(why, 1, err) }

// dropN counts n datagrams lost on their way (why) and keeps the first
// cause.
func (u *udpSession) dropN(why udpDrop, n int, err error) {
	u.dropped.Add(uint64(n))
	u.r.udpN.drop(why, uint64(n))
	if u.firstErr.Load() == nil {
		e := fmt.Errorf("%s: %w", why, err)
		u.firstErr.CompareAndSwap(nil, &e)
	}
}

// up carries the client's datagrams to the target until the session has
// been idle for UDPIdle, the target's socket failed, or the relay closed.
// It reads from the endpoint directly, every datagram queued at once, and
// waits for gVisor's notification only when none is.
func (u *udpSession) up() {
	r := u.r
	if r.holdUp != nil {
		<-r.holdUp
	}
	b := r.udpBatches.Get().(*udpBatch)
	defer r.udpBatches.Put(b)
	we, ready := waiter.NewChannelEntry(waiter.ReadableEvents)
	u.in.wq.EventRegister(&we)
	defer u.in.wq.EventUnregister(&we)
	idle := r.cfg.UDPIdle
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		if n, err := u.pass(b); n > 0 {
			continue
		} else if _, wait := err.(*tcpip.ErrWouldBlock); !wait {
			return // closed, or an error the client's side reported
		}
		select {
		case <-ready:
		case <-u.wake:
		case <-u.downDone:
			return
		case <-timer.C:
			// The idle end as known now: a datagram the other way
			// may have moved it.
			end := u.start.Add(time.Duration(u.last.Load()) + idle)
			if !time.Now().Before(end) {
				return
			}
			timer.Reset(time.Until(end))
		}
	}
}

// pass reads the datagrams the client's endpoint holds, up to a batch, and
// writes them to the target; it returns how many it read, and the read's
// error when it read none.
func (u *udpSession) pass(b *udpBatch) (int, tcpip.Error) {
	err := b.read(u.in.ep)
	slow := b.n
	q, fast := u.q.Load(), 0
	if q != nil {
		fast = q.peek(b.msgs[b.n:])
		b.n += fast
	}
	n := b.n
	if n == 0 {
		return 0, err
	}
	u.read.Add(uint64(slow))
	// The endpoint has room now: an admit waiting for it goes on
	// while the batch is written.
	u.madeRoom()
	u.touch()
	u.flush(b)
	if fast > 0 {
		q.release(fast)
		u.taken.Add(uint64(fast))
		u.madeRoom()
	}
	// A write that blocked (the target's socket full) kept the
	// session busy: idle counts from its end, or the datagrams
	// queued meanwhile would be left unread when it ends.
	u.touch()
	return n, nil
}

// madeRoom lets an admit waiting for room go on.
func (u *udpSession) madeRoom() {
	if u.waiting.Load() {
		select {
		case u.room <- struct{}{}:
		default:
		}
	}
}

// flush writes the batch's datagrams to the target, with one sendmmsg
// where the socket takes it, and empties the batch. A datagram the
// socket refuses is counted dropped and the rest still written.
//
// A target's socket that is full (the real network beyond it is slower
// than the path) is waited for, and meanwhile admit lets the client's
// endpoint overflow rather than hold up the path: the bottleneck is the
// real network's, and a real one drops there too instead of stopping
// every other flow. Each batch is first offered without waiting
// (MSG_DONTWAIT) to tell a full socket from a slow machine.
//
// Datagrams of one size that follow each other go as one message when the
// socket segments (UDP_SEGMENT, see udpBatch.group): the kernel's work
// per datagram toward the target, half of what the up direction cost,
// is then done once per message.
func (u *udpSession) flush(b *udpBatch) {
	msgs, counts := b.msgs[:b.n], []int(nil)
	if u.segMax > 0 && u.batch != nil {
		msgs, counts = b.group(u.segMax)
	}
	count := func(i int) int {
		if counts == nil {
			return 1
		}
		return counts[i]
	}
	var bytes, done int // done: datagrams written or dropped
	flags := msgDontWait
	for len(msgs) > 0 {
		var k int
		var err error
		if u.batch != nil {
			// sendmmsg's -1 on an error (an ICMP error of an
			// earlier datagram, say) comes back as is.
			k, err = u.batch.WriteBatch(msgs, flags)
			k = max(k, 0)
		} else if _, err = u.out.Write(msgs[0].Buffers[0]); err == nil {
			k = 1
		}
		for i, m := range msgs[:k] {
			for _, d := range m.Buffers {
				bytes += len(d)
			}
			done += count(i)
		}
		msgs = msgs[k:]
		if counts != nil {
			counts = counts[k:]
		}
		if err != nil && errors.Is(err, syscall.EAGAIN) {
			u.targetBlocked()
			flags = 0 // wait for the socket
			continue
		}
		if err == nil && k == 0 {
			err = io.ErrShortWrite
		}
		if err != nil && len(msgs) > 0 {
			if count(0) > 1 && segmentRefused(err) {
				// The socket would not segment (a route whose
				// MTU shrank): the rest one datagram each.
				u.segMax = 0
				msgs, counts = b.msgs[done:b.n], nil
				continue
			}
			u.dropN(dropToTarget, count(0), err)
			done += count(0)
			msgs = msgs[1:]
			if counts != nil {
				counts = counts[1:]
			}
		}
	}
	u.r.udpN.up.Add(uint64(bytes))
	u.targetFull.Store(false)
	b.reset()
}

// segmentRefused reports whether err is the socket refusing a message
// it was to segment.
func segmentRefused(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EMSGSIZE) ||
		errors.Is(err, syscall.ENOPROTOOPT) || errors.Is(err, syscall.EOPNOTSUPP)
}

// targetBlocked notes that the target's socket is full: the rest of the
// batch waits for it, and an admit waiting on the session goes on.
func (u *udpSession) targetBlocked() {
	u.targetFull.Store(true)
	select {
	case u.room <- struct{}{}:
	default:
	}
}

// admit returns once the session's endpoint (fast false) or its queue
// (fast true) can take a datagram of n bytes, or after udpAdmitWait if the
// up direction reads nothing meanwhile (then it does not wait again until
// it reads). It reports whether there is room.
func (u *udpSession) admit(n int, fast bool) bool {
	for m := u.maxLen.Load(); int64(n) > m && !u.maxLen.CompareAndSwap(m, int64(n)); m = u.maxLen.Load() {
	}
	if u.fits(n, fast) {
		return true
	}
	if u.stuck.Load() == u.read.Load()+u.taken.Load()+1 || u.targetFull.Load() {
		return false
	}
	u.r.udpN.waits.Add(1)
	u.waiting.Store(true)
	defer u.waiting.Store(false)
	t := time.NewTimer(u.r.admitWait) // only when waiting: the common case allocates nothing
	defer t.Stop()
	for !u.fits(n, fast) && !u.targetFull.Load() {
		select {
		case <-u.room:
		case <-u.gone:
			return false
		case <-t.C:
			u.stuck.Store(u.read.Load() + u.taken.Load() + 1)
			return false
		}
	}
	return u.fits(n, fast)
}

// fits reports whether the session's queue (fast), or else the client's
// endpoint, has room for a datagram of n bytes. For the endpoint: room
// for one more of the largest datagrams seen, counting what gVisor took
// into it less what it dropped and what the up direction read.
func (u *udpSession) fits(n int, fast bool) bool {
	if fast {
		q := u.q.Load()
		return q == nil || q.fits(n)
	}
	if u.st == nil {
		return true
	}
	st := u.st
	queued := int64(st.PacketsReceived.Value() - st.ReceiveErrors.ReceiveBufferOverflow.Value() -
		st.ReceiveErrors.ClosedReceiver.Value() - u.read.Load())
	return (queued+1)*u.maxLen.Load() <= u.rcvBuf
}

// intercept takes pkt, an IP packet whose header fits (networkProtocol
// checked it), when it is a datagram of an open UDP session that the fast
// path may take: its payload goes to the session's queue, waiting for
// room while the session is busy (see admit), and intercept reports true.
// Any other datagram of a session goes to gVisor (false), after waiting
// while the session's endpoint could not take it. It costs an atomic load
// while no session is open.
func (r *Relay) intercept(pkt []byte) bool {
	if r.sessN.Load() == 0 {
		return false
	}
	k, payload, fast, ok := parseUDP(pkt)
	if !ok {
		return false
	}
	u := (*r.sessions.Load())[k]
	if u == nil {
		return false
	}
	if fast && u.deliver(payload) {
		return true
	}
	u.admit(len(payload), false)
	return false
}

// deliver queues a datagram's payload for the up direction, waiting for
// room (see admit); one that finds no room after that is dropped,
// counted as overflow. It reports false, queueing nothing, when the
// session has no queue (it ended, or the Budget had no room for one):
// then the datagram goes to gVisor.
func (u *udpSession) deliver(p []byte) bool {
	q := u.queue()
	if q == nil {
		return false
	}
	for waited := false; ; waited = true {
		ok, wasEmpty, closed := q.put(p)
		switch {
		case closed:
			return false
		case ok:
			if wasEmpty {
				select {
				case u.wake <- struct{}{}:
				default:
				}
			}
		case waited || !u.admit(len(p), true):
			u.r.udpN.drop(dropOverflow, 1)
		default:
			continue
		}
		u.r.fastIn.Add(1)
		return true
	}
}

// queue returns the session's queue, made with the first fast datagram
// when the Budget has room for it; nil without one.
func (u *udpSession) queue() *udpQueue {
	if q := u.q.Load(); q != nil {
		return q
	}
	if !u.r.budget.take(udpQueueBytes) {
		return nil
	}
	q := newUDPQueue()
	if !u.q.CompareAndSwap(nil, q) {
		u.r.budget.give(udpQueueBytes)
		return u.q.Load()
	}
	return q
}

// end counts what the client's socket dropped and logs the session's
// losses, once both sockets are released.
func (u *udpSession) end() {
	overflows := u.in.overflows()
	u.r.udpN.drop(dropOverflow, overflows)
	if n := u.dropped.Load(); n > 0 || overflows > 0 {
		var cause error
		if p := u.firstErr.Load(); p != nil {
			cause = *p
		}
		u.r.log.Debug("udp session dropped datagrams", zap.Stringer("target", u.target), zap.Uint64("write_failures", n),
			zap.Uint64("socket_overflows", overflows), zap.NamedError("first_cause", cause))
	}
}

// batchWriter writes several datagrams with one system call (sendmmsg):
// x/net's ipv4 and ipv6 PacketConn.
type batchWriter interface {
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// batchWriterOf returns the batch writer of a UDP socket (or of a
// connection that is one itself); nil for anything else (a test's Dial)
// and off Linux (no sendmmsg), which is written one datagram at a time.
func batchWriterOf(c net.Conn) batchWriter {
	if bw, ok := c.(batchWriter); ok {
		return bw
	}
	uc, ok := c.(*net.UDPConn)
	if !ok || !batchSyscalls {
		return nil
	}
	if a, ok := uc.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		return ipv6.NewPacketConn(uc)
	}
	return ipv4.NewPacketConn(uc)
}

// udpBatch is what a session's up direction reads datagrams into and
// writes them from: an arena they are read into back to back, and their
// messages for one sendmmsg. Pooled by the relay; nothing in it is
// allocated per datagram.
type udpBatch struct {
	arena []byte
	w     tcpip.SliceWriter // the part of arena the next datagram is read into
	msgs  []ipv4.Message    // each with one buffer: a datagram in arena
	n     int               // datagrams held
	off   int               // arena bytes held
	// group's: the messages that each carry a run of datagrams, how
	// many each carries, their datagrams (each message's Buffers a
	// part of bufs) and their UDP_SEGMENT control messages.
	groups []ipv4.Message
	counts []int
	bufs   [][]byte
	oob    [][segmentCmsgLen]byte
}

func newUDPBatch(n int) *udpBatch {
	b := &udpBatch{arena: make([]byte, udpArena), msgs: make([]ipv4.Message, n),
		groups: make([]ipv4.Message, n), counts: make([]int, n), bufs: make([][]byte, n), oob: make([][segmentCmsgLen]byte, n)}
	for i := range b.msgs {
		b.msgs[i].Buffers = make([][]byte, 1)
	}
	return b
}

// read reads datagrams from ep until it holds none, the batch is full, or
// the arena could not take a datagram of the largest size. It returns the
// error that stopped it (ErrWouldBlock: ep is empty), nil when full.
func (b *udpBatch) read(ep tcpip.Endpoint) tcpip.Error {
	for b.n < len(b.msgs) && len(b.arena)-b.off >= udpBuffer {
		b.w = tcpip.SliceWriter(b.arena[b.off : b.off+udpBuffer])
		res, err := ep.Read(&b.w, tcpip.ReadOptions{})
		if err != nil {
			return err
		}
		b.msgs[b.n].Buffers[0] = b.arena[b.off : b.off+res.Count]
		b.off += res.Count
		b.n++
	}
	return nil
}

// reset empties the batch.
func (b *udpBatch) reset() {
	for i := range b.msgs[:b.n] {
		b.msgs[i].Buffers[0] = nil
	}
	clear(b.bufs[:b.n])
	for i := range b.groups {
		b.groups[i].Buffers = nil
	}
	b.n, b.off = 0, 0
}
