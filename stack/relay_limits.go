package stack

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// What bounds the relay's memory and the life of its connections: the
// buffer budget, the idle timeout, and the echo service's growing ring.

// tcpCharge is what a TCP connection handled as act takes of the budget
// at first: the first sizes of its gVisor buffers (relay_buffers.go), and
// its copy buffers or its echo ring's first size.
func tcpCharge(act action) int64 {
	const gvisor = relaySendInitial + relayReceiveInitial
	switch act {
	case actRelay:
		return gvisor + 2*tcpCopyBuffer
	case actEcho:
		return gvisor + echoInitial
	}
	return gvisor + tcpCopyBuffer
}

// budget is the relay's Budget: bytes its buffers, and gVisor's buffers
// of its connections, may take. As Linux's tcp_mem, it has a pressure
// mark below its limit: past the mark no buffer grows any more (grow),
// while connections and sessions are still admitted with their first
// sizes (take) up to the limit. So connections that grew cannot spend
// the whole budget and shut new ones out.
type budget struct {
	limit int64
	n     atomic.Int64
}

// take reserves n bytes; it reports false, reserving nothing, when that
// would exceed the limit.
func (b *budget) take(n int64) bool { return b.reserve(n, b.limit) }

// grow reserves n bytes for a buffer that grows; it reports false,
// reserving nothing, when that would take the budget past its pressure
// mark, three quarters of the limit.
func (b *budget) grow(n int64) bool { return b.reserve(n, b.limit-b.limit/4) }

func (b *budget) reserve(n, limit int64) bool {
	if b.n.Add(n) > limit {
		b.n.Add(-n)
		return false
	}
	return true
}

// give returns n bytes taken before.
func (b *budget) give(n int64) { b.n.Add(-n) }

func (b *budget) used() int64 { return b.n.Load() }

// activity is when a connection last carried a byte, either way, for its
// idle timeout. Reads wait with a deadline at the idle end known when
// they start; when it passes, the other direction may have moved it.
type activity struct {
	start time.Time
	idle  time.Duration
	last  atomic.Int64 // nanoseconds since start, on the monotonic clock
}

func newActivity(idle time.Duration) *activity {
	return &activity{start: time.Now(), idle: idle}
}

func (a *activity) touch() { a.last.Store(int64(time.Since(a.start))) }

// deadline is the idle end as known now.
func (a *activity) deadline() time.Time {
	return a.start.Add(time.Duration(a.last.Load()) + a.idle)
}

// expired reports whether err is a read deadline that found the
// connection idle; a deadline that passed while the other direction
// moved it is not, and the caller sets the new one and reads on.
func (a *activity) expired(err error) (deadline, idle bool) {
	if !isTimeout(err) {
		return false, false
	}
	return true, time.Since(a.start) >= time.Duration(a.last.Load())+a.idle
}

// isTimeout reports whether err is a read deadline passing: gonet reports
// it as a net.Error with Timeout, not as os.ErrDeadlineExceeded. No error
// returns at once: the net.Error errors.As fills escapes to the heap, and
// every read of the relay asks.
func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// errIdle ends a connection that carried nothing for TCPIdle.
var errIdle = errors.New("idle")

// readIdle reads c until a byte arrives, an error, or the connection has
// been idle for its timeout (errIdle).
func readIdle(c net.Conn, b []byte, a *activity) (int, error) {
	for {
		n, err := c.Read(b)
		if n > 0 {
			a.touch()
		}
		if dl, idle := a.expired(err); dl {
			switch {
			case n > 0:
				return n, nil // the next Read sets the deadline again
			case idle:
				return 0, errIdle
			}
			c.SetReadDeadline(a.deadline())
			continue
		}
		return n, err
	}
}

// byteRing is a bounded byte queue between one producer and one consumer
// that read and write straight into and out of its memory. It starts
// small and doubles when the producer finds it full, up to a cap, as long
// as grow grants the extra bytes; then the producer waits.
type byteRing struct {
	mu     sync.Mutex // guards everything below
	cond   sync.Cond  // signalled on every change
	buf    []byte
	start  int  // index of the first queued byte
	n      int  // bytes queued
	closed bool // no more bytes will be produced
	max    int
	grow   func(extra int64) bool
}

// newByteRing returns a ring of size bytes that may grow to max; grow,
// when not nil, is asked for each growth's extra bytes.
func newByteRing(size, maxSize int, grow func(extra int64) bool) *byteRing {
	b := &byteRing{buf: make([]byte, size), max: maxSize, grow: grow}
	b.cond.L = &b.mu
	return b
}

// size returns the ring's size now.
func (b *byteRing) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

// tryGrow doubles the full ring, up to max, if grow grants it. The queued
// bytes move to the front of the new memory; a slice the consumer holds
// from readable stays valid (it reads the old memory, which nobody writes
// any more), and its consumed count applies to the same bytes.
func (b *byteRing) tryGrow() bool {
	size := min(2*len(b.buf), b.max)
	if size <= len(b.buf) || b.grow != nil && !b.grow(int64(size-len(b.buf))) {
		return false
	}
	nb := make([]byte, size)
	k := copy(nb, b.buf[b.start:])
	copy(nb[k:], b.buf[:b.start])
	b.buf, b.start = nb, 0
	return true
}

// writable waits for free space and returns the contiguous part of it
// after the queued bytes; nil once closed.
func (b *byteRing) writable() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.n == len(b.buf) && !b.closed && !b.tryGrow() {
		b.cond.Wait()
	}
	if b.closed {
		return nil
	}
	if b.n == 0 {
		b.start = 0 // the consumer holds no slice: start over
		return b.buf
	}
	end := (b.start + b.n) % len(b.buf)
	if end < b.start {
		return b.buf[end:b.start] // the queued bytes wrap around
	}
	return b.buf[end:]
}

// produced queues the first n bytes of the last writable slice.
func (b *byteRing) produced(n int) {
	b.mu.Lock()
	b.n += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// readable waits for queued bytes and returns the contiguous part of them
// at the front; nil once closed and empty.
func (b *byteRing) readable() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.n == 0 && !b.closed {
		b.cond.Wait()
	}
	if b.n == 0 {
		return nil
	}
	return b.buf[b.start:min(b.start+b.n, len(b.buf))]
}

// consumed drops the first n queued bytes.
func (b *byteRing) consumed(n int) {
	b.mu.Lock()
	b.start = (b.start + n) % len(b.buf)
	b.n -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// close ends the queue: writable returns nil, readable once it is empty.
func (b *byteRing) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}
