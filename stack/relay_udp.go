package stack

import (
	"errors"
	"fmt"
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
