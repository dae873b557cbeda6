package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/stack"
)

// tcpConn is one client's connection through a proxy: the real socket
// the proxy accepted (rc) and the near host's connection to the upstream
// (nc), whose bytes cross the group's path as packets. Two goroutines
// copy, one per direction, applying that direction's stream rules
// between two reads; its timers are per connection, never per packet.
type tcpConn struct {
	p   *Proxy
	g   *group
	rc  net.Conn
	ctx context.Context // done when the connection closes
	end context.CancelFunc

	opened time.Time
	// has names the stream toxics the connection drew; guarded by the
	// proxy's lock.
	has map[string]bool

	// rules are what the connection's toxics do to its streams now, read
	// by the copy loops between two reads (applyToxics).
	rules atomic.Pointer[[2]streamRule]

	mu sync.Mutex // guards nc, closed, timeout, resets and limits
	nc *stack.TCPConn
	// closed is set by close: the sockets are closed, or being.
	closed  bool
	timeout *time.Timer    // closes the connection (timeout toxic)
	resets  [2]*time.Timer // reset it (reset_peer), armed by the first bytes
	limits  []limitCount   // the state of each limit_data toxic of the proxy
}

// limitCount is a limit_data toxic's state on one connection: the bytes
// it let through while in force there, counted from when it began on the
// connection. This is toxiproxy's state of a stateful toxic, made when
// the toxic is added to the connection (or the connection opens), kept
// across the toxic's updates, gone with it.
type limitCount struct {
	name   string
	dir    direction
	bytes  int64 // the toxic's limit
	passed int64
	on     bool // the connection drew it (toxicity): it counts and limits
}

func newTCPConn(ctx context.Context, p *Proxy, g *group, rc net.Conn) *tcpConn {
	c := &tcpConn{p: p, g: g, rc: rc, opened: time.Now()}
	c.ctx, c.end = context.WithCancel(ctx)
	return c
}

// run connects across the path to the upstream and copies both ways
// until both ends are done, then forgets the connection.
func (c *tcpConn) run() {
	defer c.p.forget(c)
	defer c.end()
	port := uint16(1)
	if _, ps, err := net.SplitHostPort(c.p.upstreamNow()); err == nil {
		if n, err := strconv.ParseUint(ps, 10, 16); err == nil && n > 0 {
			port = uint16(n)
		}
	}
	// The timers are armed already (admit): a timeout toxic's close
	// ends a handshake its lost packets hold up.
	nc, err := c.g.b.Client().DialTCP(c.ctx, virtualUpstream(port), hostcfg.TCPOptions{})
	if err != nil {
		// Refused or unreachable upstream: the client's connection is
		// reset, as the upstream's refusal would have.
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if !closed { // else the proxy stopped, or a timeout closed it
			c.p.counts.upstreamFailed.Add(1)
			c.close(true)
		}
		return
	}
	c.mu.Lock()
	c.nc = nc
	closed := c.closed
	c.mu.Unlock()
	if closed { // the proxy stopped while the dial went on
		nc.Close()
		c.rc.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.copy(upstream, nc, c.rc) }()
	go func() { defer wg.Done(); c.copy(downstream, c.rc, nc) }()
	wg.Wait()
	c.close(false)
}

func (p *Proxy) upstreamNow() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upstream
}

// halfCloser is a connection whose sending side shuts down on its own.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// copyBuffer is the bytes one direction of a connection reads at once.
const copyBuffer = 16 << 10

// copy carries direction d's bytes from src to dst until src ends,
// applying d's stream rules to each read.
func (c *tcpConn) copy(d direction, dst, src net.Conn) {
	buf := make([]byte, copyBuffer)
	var slicer *slicing
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.p.counts.received[d].Add(uint64(n))
			r := c.rules.Load()[d]
			if !c.pass(d, dst, buf[:n], r, &slicer) {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.endStream(d, dst, c.rules.Load()[d])
				return
			}
			// The peer reset, or the connection closed under us: pass
			// the reset on to the other end.
			c.close(true)
			return
		}
	}
}

// pass writes data to dst under rule r, and reports whether to go on.
func (c *tcpConn) pass(d direction, dst net.Conn, data []byte, r streamRule, slicer **slicing) bool {
	if r.reset {
		// reset_peer: the bytes go nowhere; the first arms the reset.
		c.p.counts.discarded[d].Add(uint64(len(data)))
		c.armReset(d, r.resetAfter)
		return true
	}
	end := false
	if r.limited {
		c.mu.Lock()
		left := c.limitLeftLocked(d)
		c.mu.Unlock()
		if left >= 0 && left <= int64(len(data)) {
			c.p.counts.discarded[d].Add(uint64(len(data)) - uint64(left))
			data, end = data[:left], true
		}
	}
	var err error
	if r.sliceSize > 0 && len(data) > 0 {
		if *slicer == nil {
			*slicer = newSlicing(c.p)
		}
		err = (*slicer).write(c.ctx, dst, data, r)
	} else if len(data) > 0 {
		_, err = dst.Write(data)
	}
	if err != nil {
		c.close(true)
		return false
	}
	c.p.counts.sent[d].Add(uint64(len(data)))
	if r.limited {
		// A limit_data added while these bytes were written counts them
		// too: toxiproxy's counts the chunks that reach it after it is
		// in the chain, which the same race decides.
		c.mu.Lock()
		for i := range c.limits {
			if l := &c.limits[i]; l.on && l.dir == d {
				l.passed += int64(len(data))
			}
		}
		c.mu.Unlock()
	}
	if end {
		// limit_data: the connection ends once its bytes went.
		c.close(false)
		return false
	}
	return true
}

// limitLeftLocked returns the bytes direction d may still pass before
// one of its limit_data toxics ends the connection, -1 for no limit.
func (c *tcpConn) limitLeftLocked(d direction) int64 {
	left := int64(-1)
	for _, l := range c.limits {
		if l.on && l.dir == d {
			if n := max(l.bytes-l.passed, 0); left < 0 || n < left {
				left = n
			}
		}
	}
	return left
}

// applyToxics puts the toxics in (those of the proxy's toxics all that
// the connection drew) in force on its streams, and arms or disarms its
// timers. The state of each limit_data toxic is kept, and begins afresh
// for the toxics fresh names (added since). With the proxy's lock held.
func (c *tcpConn) applyToxics(in, all []*Toxic, fresh map[string]bool) {
	r := streamRules(in)
	c.mu.Lock()
	var limits []limitCount
	for _, t := range all {
		if t.Type != "limit_data" {
			continue
		}
		l := limitCount{name: t.Name, dir: t.dir}
		if i := slices.IndexFunc(in, func(o *Toxic) bool { return o.Name == t.Name }); i >= 0 {
			l.on, l.bytes = true, in[i].ints["bytes"]
		}
		if !fresh[t.Name] {
			if i := slices.IndexFunc(c.limits, func(o limitCount) bool { return o.name == t.Name }); i >= 0 {
				l.passed = c.limits[i].passed
			}
		}
		limits = append(limits, l)
	}
	c.limits = limits
	c.mu.Unlock()
	c.rules.Store(&r)
	c.refresh()
}

// endStream passes the end of direction d's stream on to dst, after
// slow_close's delay.
func (c *tcpConn) endStream(d direction, dst net.Conn, r streamRule) {
	if r.slowClose > 0 {
		t := time.NewTimer(r.slowClose)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
	}
	if r.reset {
		return // the reset will end it
	}
	if hc, ok := dst.(halfCloser); ok {
		hc.CloseWrite()
	}
}

// armReset resets the connection after after, from the first bytes of
// direction d while reset_peer is in force there.
func (c *tcpConn) armReset(d direction, after time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resets[d] != nil || c.closed {
		return
	}
	c.resets[d] = time.AfterFunc(after, func() {
		c.p.counts.resets.Add(1)
		c.close(true)
	})
}

// refresh arms or disarms the connection's timers for its rules now: a
// timeout toxic's close (from when the toxic began, or the connection
// opened if later), and the end of a reset no longer in force.
func (c *tcpConn) refresh() {
	r := c.rules.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	var at time.Time
	for _, d := range []direction{upstream, downstream} {
		if !r[d].reset && c.resets[d] != nil {
			c.resets[d].Stop()
			c.resets[d] = nil
		}
		s := r[d]
		if !s.timeout || s.timeoutAfter == 0 {
			continue
		}
		from := s.timeoutSince
		if from.Before(c.opened) {
			from = c.opened
		}
		if t := from.Add(s.timeoutAfter); at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if c.timeout != nil {
		c.timeout.Stop()
		c.timeout = nil
	}
	if !at.IsZero() {
		c.timeout = time.AfterFunc(time.Until(at), func() { c.close(false) })
	}
}

// close ends the connection: with a RST both ways when reset (the
// client's socket closed with SO_LINGER 0, the near host's aborted),
// else with a FIN. Safe more than once and from any goroutine.
func (c *tcpConn) close(reset bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	nc := c.nc
	if c.timeout != nil {
		c.timeout.Stop()
	}
	for _, t := range c.resets {
		if t != nil {
			t.Stop()
		}
	}
	c.mu.Unlock()
	c.end()
	if reset {
		resetConn(c.rc)
		if nc != nil {
			nc.Reset()
		}
	} else {
		// What the client sent and nobody read would make the kernel
		// answer the close with a RST: a timeout toxic's bytes, read
		// and dropped by toxiproxy, are still in the socket here.
		c.p.counts.discarded[upstream].Add(uint64(drain(c.rc)))
		c.rc.Close()
	}
	if nc != nil {
		nc.Close()
	}
}

// drain reads and drops what c holds already, without waiting, up to a
// bound; it returns the bytes dropped.
func drain(c net.Conn) int {
	// A deadline already past fails a read before it looks: a moment
	// ahead takes what is there.
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	var buf [4096]byte
	n := 0
	for n < 1<<20 {
		k, err := c.Read(buf[:])
		n += k
		if err != nil {
			break
		}
	}
	return n
}

// resetConn closes a real TCP connection with a RST (SO_LINGER 0).
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// slicing is the slicer toxic's state of one direction of a connection:
// its timer, reused between slices, and its random sizes.
type slicing struct {
	p     *Proxy
	timer *time.Timer
}

func newSlicing(p *Proxy) *slicing {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &slicing{p: p, timer: t}
}

// write writes data in slices of r's average size, give or take its
// variation, waiting r's delay after each.
func (s *slicing) write(ctx context.Context, dst net.Conn, data []byte, r streamRule) error {
	for len(data) > 0 {
		n := r.sliceSize
		if r.sliceVariation > 0 {
			s.p.mu.Lock()
			n += s.p.rnd.IntN(2*r.sliceVariation+1) - r.sliceVariation
			s.p.mu.Unlock()
		}
		n = min(max(n, 1), len(data))
		if _, err := dst.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
		if r.sliceDelay > 0 {
			s.timer.Reset(r.sliceDelay)
			select {
			case <-s.timer.C:
			case <-ctx.Done():
				s.timer.Stop()
				return ctx.Err()
			}
		}
	}
	return nil
}
