package stack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// The relay's UDP: a session for each client address and destination,
// decided on the goroutine that delivers its first datagram and carried on
// a goroutine of its own until it has been idle for UDPIdle.

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
	go r.runUDPSession(in, target)
	return true
}

// runUDPSession relays one UDP session: datagrams from the client (queued in
// in's endpoint, starting with the first) to a host socket connected to
// target, and datagrams from target back, until neither way has carried a
// datagram for UDPIdle, or Close.
func (r *Relay) runUDPSession(in *relayUDP, target netip.AddrPort) {
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
	u := &udpSession{r: r, in: in, out: out, target: target, start: time.Now()}
	r.wg.Add(1)
	go u.down()
	u.up()
	r.release(in, out)
	u.end()
}

// udpSession is one relayed UDP session: the client's socket and the
// target's, and what both directions share. Its up direction runs on the
// session's goroutine, its down direction on one of its own.
type udpSession struct {
	r       *Relay
	in      *relayUDP // the client's side
	out     net.Conn  // the target's
	target  netip.AddrPort
	start   time.Time
	last    atomic.Int64 // the last datagram either way, in nanoseconds since start (monotonic)
	dead    atomic.Bool  // the target's socket failed
	dropped atomic.Uint64
	// Failures are logged once per session, with the first cause and
	// the count, not once per datagram.
	firstErr atomic.Pointer[error]
}

// touch marks the session busy now.
func (u *udpSession) touch() { u.last.Store(int64(time.Since(u.start))) }

// drop counts a datagram lost on its way (way) and keeps the first cause.
func (u *udpSession) drop(way string, err error) {
	u.dropped.Add(1)
	u.r.udpN.dropped.Add(1)
	if u.firstErr.Load() == nil {
		e := fmt.Errorf("%s: %w", way, err)
		u.firstErr.CompareAndSwap(nil, &e)
	}
}

// down carries the target's datagrams to the client until the target's
// socket fails or is closed, then wakes the up direction.
func (u *udpSession) down() {
	r := u.r
	defer r.wg.Done()
	bp := r.udpB.Get().(*[]byte)
	defer r.udpB.Put(bp)
	for {
		n, err := u.out.Read(*bp)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				continue // an ICMP error from the target: keep the session
			}
			u.dead.Store(true)
			if !r.isClosed() {
				r.log.Debug("udp relay failed: the target's socket", zap.Stringer("target", u.target), zap.Error(err))
			}
			u.in.SetReadDeadline(time.Now()) // wake the other direction
			return
		}
		u.touch()
		if _, err := u.in.Write((*bp)[:n]); err == nil {
			r.udpN.down.Add(uint64(n))
		} else {
			u.drop("to the client", err)
		}
	}
}

// up carries the client's datagrams to the target until the session has
// been idle for UDPIdle, the target's socket failed, or the relay closed.
func (u *udpSession) up() {
	r := u.r
	bp := r.udpB.Get().(*[]byte)
	defer r.udpB.Put(bp)
	idle := r.cfg.UDPIdle
	for {
		// The deadline is the session's idle end as known now; when it
		// passes, a datagram the other way may have moved it.
		u.in.SetReadDeadline(u.start.Add(time.Duration(u.last.Load()) + idle))
		n, err := u.in.Read(*bp)
		if err != nil {
			if isTimeout(err) && !u.dead.Load() && time.Since(u.start) < time.Duration(u.last.Load())+idle {
				continue
			}
			return
		}
		u.touch()
		if _, err := u.out.Write((*bp)[:n]); err == nil {
			r.udpN.up.Add(uint64(n))
		} else {
			u.drop("to the target", err)
		}
		// A write that blocked (the target's socket full) kept the
		// session busy: idle counts from its end, or the datagrams
		// queued meanwhile would be left unread when it ends.
		u.touch()
	}
}

// end counts what the client's socket dropped and logs the session's
// losses, once both sockets are released.
func (u *udpSession) end() {
	overflows := u.in.overflows()
	u.r.udpN.dropped.Add(overflows)
	if n := u.dropped.Load(); n > 0 || overflows > 0 {
		var cause error
		if p := u.firstErr.Load(); p != nil {
			cause = *p
		}
		u.r.log.Debug("udp session dropped datagrams", zap.Stringer("target", u.target), zap.Uint64("write_failures", n),
			zap.Uint64("socket_overflows", overflows), zap.NamedError("first_cause", cause))
	}
}
