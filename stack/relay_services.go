package stack

import (
	"io"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/adapters/gonet"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv4"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv6"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/udp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/waiter"
	"go.uber.org/zap"
)

// The relay's services on the peer addresses: echo (port 7) and discard
// (port 9), over TCP and UDP.

// echoTCP sends back what the client sends, then half-closes.
//
// Reading and writing run on two goroutines with a ring of echoBuffer
// bytes between them, rather than one loop that reads only once its last
// write is done. Such a loop stops reading whenever a write waits, and a
// gVisor endpoint whose application stops reading can stall for good:
// when its buffer fills (out-of-order segments included) it advertises a
// zero window, and with a zero window it accepts no segment carrying data,
// not even the retransmission that fills the hole in front of the
// out-of-order data, nor the acknowledgements in the peer's segments past
// a window edge it has moved back (transport/tcp receiver.acceptable; see
// gvisor#10312 on its shrinking windows). Measured here before this
// change: one 4 MiB echo in five stalled for good.
func (r *Relay) echoTCP(c *relayTCP, a *activity) {
	ring := newByteRing(echoInitial, echoBuffer, r.budget.grow)
	defer func() { r.budget.give(int64(ring.size() - echoInitial)) }() // the first size is the caller's
	var failed, idled atomic.Bool
	fail := func(op string, err error) {
		if failed.CompareAndSwap(false, true) {
			if !r.isClosed() {
				r.log.Debug("tcp echo failed", zap.String("op", op), zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
			}
			c.abort()    // wakes a blocked Read or Write
			ring.close() // wakes the other goroutine
		}
	}
	done := make(chan struct{})
	r.wg.Add(1) // the caller holds a count, so Add is safe
	go func() {
		defer r.wg.Done()
		defer close(done)
		for {
			b := ring.readable()
			if b == nil {
				break // end of stream, or failed
			}
			n, err := c.Write(b)
			r.tcpN.down.Add(uint64(n))
			a.touch()
			ring.consumed(n)
			if err != nil {
				fail("write", err)
				return
			}
		}
		if !failed.Load() {
			c.CloseWrite()
		}
	}()
	c.SetReadDeadline(a.deadline())
	for {
		b := ring.writable()
		if b == nil {
			break // failed
		}
		n, err := readIdle(c, b, a)
		r.tcpN.up.Add(uint64(n))
		ring.produced(n)
		if err == io.EOF {
			ring.close()
			break
		}
		if err != nil {
			idled.Store(err == errIdle)
			fail("read", err)
			break
		}
	}
	<-done
	r.countEnd(failed.Load(), idled.Load())
	r.release(c)
}

// discardTCP reads and drops what the client sends until it closes.
func (r *Relay) discardTCP(c *relayTCP, a *activity) {
	bp := r.bufs.Get().(*[]byte)
	defer r.bufs.Put(bp)
	buf := (*bp)[:cap(*bp)]
	c.SetReadDeadline(a.deadline())
	for {
		n, err := readIdle(c, buf, a)
		r.tcpN.up.Add(uint64(n))
		if err == io.EOF {
			break
		}
		if err != nil {
			if err == errIdle {
				c.abort()
			}
			if !r.isClosed() {
				r.log.Debug("tcp discard ended", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
			}
			r.countEnd(true, err == errIdle)
			break
		}
	}
	r.release(c)
}

// startUDPServices binds echo and discard to each peer address (not to
// the unspecified address: in transparent mode that would capture port 7
// of every destination).
func (r *Relay) startUDPServices() error {
	for a := range r.peer {
		proto := ipv4.ProtocolNumber
		if a.Is6() {
			proto = ipv6.ProtocolNumber
		}
		for _, port := range []uint16{echoPort, discardPort} {
			ap := netip.AddrPortFrom(a, port)
			var wq waiter.Queue
			ep, terr := r.h.s.NewEndpoint(udp.ProtocolNumber, proto, &wq)
			if terr != nil {
				return opError("listen", "udp", ap, terr)
			}
			if terr := ep.Bind(fullAddr(ap)); terr != nil {
				ep.Close()
				return opError("listen", "udp", ap, terr)
			}
			c := &relayUDP{UDPConn: gonet.NewUDPConn(&wq, ep), ep: ep}
			if !r.keep(c) {
				return net.ErrClosed
			}
			r.wg.Add(1)
			go r.serveUDP(c, port == echoPort)
		}
	}
	return nil
}

// serveUDP answers each datagram with itself (echo) or not at all
// (discard), until Close.
func (r *Relay) serveUDP(c *relayUDP, echo bool) {
	defer r.wg.Done()
	defer func() { r.udpN.drop(dropOverflow, c.overflows()) }()
	bp := r.udpB.Get().(*[]byte)
	defer r.udpB.Put(bp)
	for {
		n, from, err := c.ReadFrom(*bp)
		if err != nil {
			return
		}
		r.udpN.up.Add(uint64(n))
		r.udpN.served.Add(1)
		if echo {
			if _, err := c.WriteTo((*bp)[:n], from); err == nil {
				r.udpN.down.Add(uint64(n))
			} else {
				r.udpN.drop(dropToClient, 1)
			}
		}
	}
}
