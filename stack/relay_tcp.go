package stack

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/adapters/gonet"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/tcp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/waiter"
	"go.uber.org/zap"
)

// The relay's TCP: a connection request decided and carried on the
// goroutine gVisor's forwarder starts for it, each relayed connection
// copied both ways until both directions end (pipe).

// handleTCP decides a TCP connection request, on the goroutine gVisor's
// forwarder started for it, and carries the connection on that goroutine
// if it is accepted. The target is dialled before the client's handshake
// is completed, so an unreachable target looks to the client like a
// refused connection.
func (r *Relay) handleTCP(req *tcp.ForwarderRequest) {
	if !r.enter() {
		req.Complete(true)
		return
	}
	defer r.wg.Done()
	id := req.ID()
	src := netip.AddrPortFrom(addrOf(id.RemoteAddress), id.RemotePort)
	dst := netip.AddrPortFrom(addrOf(id.LocalAddress), id.LocalPort)
	act, target, why := r.decide("tcp", dst)
	if !r.admitTCP(act, why, src, dst) {
		req.Complete(true)
		return
	}
	defer r.tcpN.active.Add(-1)
	defer r.budget.give(tcpCharge(act))
	in, out, ok := r.acceptTCP(req, act, target, src, dst)
	if !ok {
		return
	}
	defer in.bufs.release()            // after the goroutines that grow them have ended
	seen := newActivity(r.cfg.TCPIdle) // for TCPIdle, from the handshake on
	switch act {
	case actRelay:
		if !r.keep(out) {
			r.release(in)
			return
		}
		r.tcpN.relayed.Add(1)
		r.pipe(in, out, seen)
	case actEcho:
		r.tcpN.served.Add(1)
		r.echoTCP(in, seen)
	case actDiscard:
		r.tcpN.served.Add(1)
		r.discardTCP(in, seen)
	}
}

// admitTCP counts and logs a connection the relay turns away: refused by
// decide, no service on the port, over the connection limit or the
// buffer budget. For one it admits, it holds a place among the active
// connections and the connection's charge of the budget, both the
// caller's to give back.
func (r *Relay) admitTCP(act action, why refusal, src, dst netip.AddrPort) bool {
	switch act {
	case actRefuse:
		r.tcpN.refuse(why)
		r.log.Debug("tcp refused", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Stringer("reason", why))
		return false
	case actNoService:
		r.tcpN.noService.Add(1)
		r.log.Debug("tcp reset: no forward or service on this port", zap.Stringer("src", src), zap.Stringer("dst", dst))
		return false
	}
	if r.tcpN.active.Add(1) > maxTCPConns {
		r.tcpN.active.Add(-1)
		r.tcpN.limited.Add(1)
		r.log.Debug("tcp reset: the relay's connection limit is reached", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Int("limit", maxTCPConns))
		return false
	}
	if !r.budget.take(tcpCharge(act)) {
		r.tcpN.active.Add(-1)
		r.tcpN.limited.Add(1)
		r.tcpN.overBudget.Add(1)
		r.log.Debug("tcp limited: the relay's buffer budget is spent", zap.Stringer("src", src), zap.Stringer("dst", dst))
		return false
	}
	return true
}

// acceptTCP dials the target of a relayed connection, then completes the
// client's handshake: an unreachable target looks to the client like a
// refused connection. in is the client's side, kept by the relay; out
// the target's (nil when served), not yet kept. ok is false when either
// failed or the relay closed; the request is then answered with a reset.
func (r *Relay) acceptTCP(req *tcp.ForwarderRequest, act action, target, src, dst netip.AddrPort) (in *relayTCP, out net.Conn, ok bool) {
	if act == actRelay {
		var err error
		if out, err = r.dial("tcp", target); err != nil {
			r.tcpN.dialErrors.Add(1)
			r.log.Debug("tcp dial failed", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Error(err))
			req.Complete(true)
			return nil, nil, false
		}
	}
	var wq waiter.Queue
	ep, terr := req.CreateEndpoint(&wq)
	if terr != nil {
		// The client went away during the handshake.
		req.Complete(true)
		r.tcpN.errors.Add(1)
		r.log.Debug("tcp relay failed: no endpoint for the client's connection", zap.Stringer("src", src), zap.Stringer("dst", dst), zap.Stringer("error", terr))
		if out != nil {
			out.Close()
		}
		return nil, nil, false
	}
	req.Complete(false)
	// No Nagle on the relay's side: the target's writes arrive already
	// shaped by its own stack, and coalescing them again would add a
	// round trip to every small exchange that a direct connection would
	// not have.
	ep.SocketOptions().SetDelayOption(false)
	in = &relayTCP{TCPConn: gonet.NewTCPConn(&wq, ep), ep: ep, bufs: newTCPBuffers(ep, &r.budget, r.h.link.MTU())}
	if !r.keep(in) {
		if out != nil {
			out.Close()
		}
		return nil, nil, false
	}
	return in, out, true
}

// relayTCP is the client's side of a relayed or served connection:
// gonet's conn and its endpoint, closed exactly once (gVisor's
// Endpoint.Close must be called once), either gracefully or with a reset.
type relayTCP struct {
	*gonet.TCPConn
	ep   tcpip.Endpoint
	bufs *tcpBuffers // its gVisor buffers' sizes, charged to the budget
	once sync.Once
	w    tcpip.SliceWriter // Read's, on the one goroutine that reads
	r    bytes.Reader      // Write's, on the one goroutine that writes
}

// Write writes b into the endpoint straight from b, and leaves the
// waiting for room to gonet's Write (the deadline, errors), which puts its
// reader and its waiter on the heap at every call. Whenever the send
// buffer is found full, the connection's buffers may grow (sendFull); so
// that gonet's Write does not fill it again unseen, it is given at most a
// third of the buffer, the room whose freeing wakes a writer, and the
// rest goes round again.
func (c *relayTCP) Write(b []byte) (int, error) {
	done := 0
	for {
		c.r.Reset(b[done:])
		n, err := c.ep.Write(&c.r, tcpip.WriteOptions{})
		c.r.Reset(nil) // hold no caller's buffer
		done += int(n)
		if err == nil && done == len(b) {
			return done, nil
		}
		c.bufs.sendFull()
		// The rest, or nothing and the error, which gonet's Write meets
		// again and reports as it does.
		part := len(b)
		if err == nil {
			part = min(len(b), done+max(int(c.bufs.snd/3), 1))
		}
		m, err2 := c.TCPConn.Write(b[done:part])
		done += m
		if err2 != nil || done == len(b) {
			return done, err2
		}
	}
}

// Read reads what the endpoint holds straight into b, and leaves the rest
// to gonet's Read (waiting for data, the deadline, the end of the stream,
// errors), which puts its writer on the heap at every call: the relay
// reads a busy connection thousands of times a second. A read deadline
// already past does not stop a read that finds data: the relay's deadlines
// (activity) find a connection idle, which data it holds is not. The
// relay sets no write deadline, which Write likewise would not see. What
// each read takes counts toward the receive buffer's growth (received);
// gonet's own call to gVisor's auto-tuning does nothing, as that is off.
func (c *relayTCP) Read(b []byte) (int, error) {
	c.w = b
	res, err := c.ep.Read(&c.w, tcpip.ReadOptions{})
	c.w = nil // hold no caller's buffer
	if err == nil && res.Count > 0 {
		c.bufs.received(res.Count)
		return res.Count, nil
	}
	n, rerr := c.TCPConn.Read(b)
	c.bufs.received(n)
	return n, rerr
}

// Close closes the connection (a FIN after what is queued).
func (c *relayTCP) Close() error {
	c.once.Do(func() { c.TCPConn.Close() })
	return nil
}

// abort resets the connection, unless it is closed already.
func (c *relayTCP) abort() {
	c.once.Do(func() {
		c.ep.Abort()
		c.TCPConn.Close()
	})
}

// pipe copies between the client's connection and the target's, one
// direction on this goroutine and one on another, until both directions
// have ended. End of stream in one direction is passed on as a half-close
// (CloseWrite) and the other direction goes on; an error in either (a
// reset, a failed write), or TCPIdle without a byte either way, resets
// both connections.
//
// The directions never wait for each other, so the client's side keeps
// being read whenever the target takes data. A target that stops reading
// until it has written (an echo server with full socket buffers) can
// still stall the connection through gVisor's zero-window handling (see
// echoTCP); the relay cannot buffer its way out of that without bound.
func (r *Relay) pipe(in *relayTCP, out net.Conn, a *activity) {
	var failed, reset atomic.Bool
	abort := func(way string, err error) {
		if failed.CompareAndSwap(false, true) {
			reset.Store(isReset(err))
			if !r.isClosed() {
				msg := "tcp relay failed: both ends reset"
				switch {
				case err == errIdle:
					msg = "tcp connection idle too long: both ends reset"
				case reset.Load():
					msg = "tcp connection reset by an end: reset passed on to the other"
				}
				r.log.Debug(msg, zap.String("way", way),
					zap.Stringer("client", in.RemoteAddr()), zap.Stringer("target", out.RemoteAddr()), zap.Error(err))
			}
			in.abort()
			if tc, ok := out.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with a reset
			}
			out.Close()
		}
	}
	var idled atomic.Bool
	end := func(way string, err error) {
		if err == errIdle {
			idled.Store(true)
		}
		abort(way, err)
	}
	done := make(chan struct{})
	r.wg.Add(1) // the caller holds a count, so Add is safe
	go func() {
		defer r.wg.Done()
		defer close(done)
		if err := r.copyHalf(out, in, &r.tcpN.up, a); err != nil {
			end("client to target", err)
		}
	}()
	if err := r.copyHalf(in, out, &r.tcpN.down, a); err != nil {
		end("target to client", err)
	}
	<-done
	if failed.Load() && reset.Load() && !idled.Load() && !r.isClosed() {
		r.tcpN.resets.Add(1)
	} else {
		r.countEnd(failed.Load(), idled.Load())
	}
	r.release(in, out)
}

// isReset reports whether err, from a read or write of a relayed
// connection, is the other end's doing: a reset (ECONNRESET from the
// host's socket, gVisor's "connection reset by peer" from the client's),
// or a write after that end closed (EPIPE).
func isReset(err error) bool {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	// gonet gives gVisor's errors as text only.
	return strings.HasSuffix(err.Error(), (&tcpip.ErrConnectionReset{}).String())
}

// countEnd counts how a served or relayed connection ended, unless Close
// ended it.
func (r *Relay) countEnd(failed, idle bool) {
	switch {
	case r.isClosed():
	case idle:
		r.tcpN.idle.Add(1)
	case failed:
		r.tcpN.errors.Add(1)
	}
}

// copyHalf copies src to dst until src ends, then half-closes dst. It
// returns an error when the copy failed or the connection was idle for
// TCPIdle (errIdle), not at end of stream.
func (r *Relay) copyHalf(dst, src net.Conn, n *atomic.Uint64, a *activity) error {
	bp := r.bufs.Get().(*[]byte)
	defer r.bufs.Put(bp)
	buf := (*bp)[:cap(*bp)]
	src.SetReadDeadline(a.deadline())
	for {
		nr, er := readIdle(src, buf, a)
		if nr > 0 {
			nw, ew := dst.Write(buf[:nr])
			n.Add(uint64(nw))
			a.touch()
			if ew != nil {
				return ew
			}
		}
		if er == io.EOF {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return nil
		}
		if er != nil {
			return er
		}
	}
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}
