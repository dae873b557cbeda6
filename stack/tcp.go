package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/adapters/gonet"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv6"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/stack"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/tcp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/waiter"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
)

// listenBacklog is the accept queue length of a listener: Linux's
// net.core.somaxconn default (since 5.4), which Go's net.Listen asks for.
const listenBacklog = 4096

// CongestionControls returns the congestion control algorithms gVisor's TCP
// offers, as its TCPAvailableCongestionControlOption lists them. It builds
// and tears down a throwaway stack to ask, so callers validating a
// configuration should call it once.
func CongestionControls() []string {
	s := stack.New(stack.Options{TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol}})
	defer s.Destroy()
	return availableCC(s)
}

// validateTCP checks o against what the host offers.
func (h *Host) validateTCP(o hostcfg.TCPOptions) error {
	var errs []error
	if o.CC != "" && !slices.Contains(h.ccs, o.CC) {
		errs = append(errs, fmt.Errorf("unknown congestion control %q (available: %s)", o.CC, strings.Join(h.ccs, ", ")))
	}
	if o.SendBuffer < 0 {
		errs = append(errs, fmt.Errorf("send buffer: %d is negative", o.SendBuffer))
	}
	if o.ReceiveBuffer < 0 {
		errs = append(errs, fmt.Errorf("receive buffer: %d is negative", o.ReceiveBuffer))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stack: host %q: tcp options: %w", h.name, err)
	}
	return nil
}

// applyTCP sets o on a new or just accepted connection. The congestion
// control is set on every connection, since gVisor does not pass a
// listener's on to the connections it accepts as Linux does; buffers are
// clamped to the ranges of options.go.
func applyTCP(ep tcpip.Endpoint, o hostcfg.TCPOptions) error {
	cc := o.CC
	if cc == "" {
		cc = defaultCC
	}
	opt := tcpip.CongestionControlOption(cc)
	if err := ep.SetSockOpt(&opt); err != nil {
		// Not expected: validateTCP has checked the name.
		return opError("set congestion control "+cc, "tcp", netip.AddrPort{}, err)
	}
	if o.SendBuffer > 0 {
		ep.SocketOptions().SetSendBufferSize(sockBuf(o.SendBuffer, tcpSendBuffer.Min, tcpSendBuffer.Max), true)
	}
	setReceiveBuffer(ep, o.ReceiveBuffer)
	return nil
}

// setReceiveBuffer pins ep's receive buffer as SO_RCVBUF(n) would, which
// turns its auto-tuning off; 0 leaves it alone.
func setReceiveBuffer(ep tcpip.Endpoint, n int) {
	if n > 0 {
		ep.SocketOptions().SetReceiveBufferSize(sockBuf(n, tcpReceiveBuffer.Min, tcpReceiveBuffer.Max), true)
	}
}

// sockBuf is the buffer a socket takes for setsockopt(SO_SNDBUF or
// SO_RCVBUF, n): twice n (tcp.SegOverheadFactor, as Linux's
// sock_setsockopt and gVisor's socket layer double it), within [lo, hi].
func sockBuf(n, lo, hi int) int64 {
	return int64(clamp(min(n, hi)*tcp.SegOverheadFactor, lo, hi))
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }

// DialTCP connects to raddr and returns the connection once established, or
// the error (ECONNREFUSED, ETIMEDOUT after gVisor's SYN retries, ...). ctx
// bounds the wait; when it ends first the attempt is abandoned.
func (h *Host) DialTCP(ctx context.Context, raddr netip.AddrPort, o hostcfg.TCPOptions) (*TCPConn, error) {
	return h.DialTCPFrom(ctx, 0, raddr, o)
}

// DialTCPFrom is DialTCP from local port lport (0: an ephemeral one). An
// ephemeral port is drawn from the host's random source, whose draws
// interleave with those of other connections opened at the same time;
// a port of the caller's choosing keeps a seeded run the same (the
// lab's flows on a virtual clock).
func (h *Host) DialTCPFrom(ctx context.Context, lport uint16, raddr netip.AddrPort, o hostcfg.TCPOptions) (*TCPConn, error) {
	raddr = netip.AddrPortFrom(raddr.Addr().Unmap(), raddr.Port())
	dialErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(raddr), Err: err}
	}
	proto, err := h.netProto(raddr.Addr())
	if err != nil {
		return nil, dialErr(err)
	}
	if err := h.validateTCP(o); err != nil {
		return nil, err
	}
	var wq waiter.Queue
	ep, terr := h.s.NewEndpoint(tcp.ProtocolNumber, proto, &wq)
	if terr != nil {
		return nil, opError("dial", "tcp", raddr, terr)
	}
	c := newTCPConn(h, ep, &wq)
	if err := h.track(c); err != nil {
		ep.Close()
		return nil, dialErr(err)
	}
	if err := applyTCP(ep, o); err != nil {
		c.Close()
		return nil, err
	}
	// Register before Connect so that no completion can be missed; a
	// refused or reset attempt signals HUp/Err rather than Out.
	if lport != 0 {
		if terr := ep.Bind(tcpip.FullAddress{Port: lport}); terr != nil {
			c.Close()
			return nil, opError("dial", "tcp", raddr, terr)
		}
	}
	entry, ch := waiter.NewChannelEntry(waiter.WritableEvents | waiter.EventHUp | waiter.EventErr)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)
	terr = ep.Connect(fullAddr(raddr))
	if _, ok := terr.(*tcpip.ErrConnectStarted); ok {
		select {
		case <-ctx.Done():
			c.Close()
			return nil, dialErr(ctx.Err())
		case <-ch:
		}
		terr = ep.LastError()
	}
	if terr != nil {
		c.Close()
		return nil, opError("dial", "tcp", raddr, terr)
	}
	return c, nil
}

// TCPListener accepts TCP connections on one port of every address of its
// Host. Closing it resets connections not yet accepted.
type TCPListener struct {
	h    *Host
	ep   tcpip.Endpoint
	wq   *waiter.Queue
	o    hostcfg.TCPOptions
	addr *net.TCPAddr
	once sync.Once
	done chan struct{} // closed by Close; wakes Accept
}

// ListenTCP listens on port (0: an ephemeral port) of every address of the
// host; with both IPv4 and IPv6 addresses one dual-stack listener takes
// both. o applies to every accepted connection; the receive buffer is set
// on the listener already, so the window scale offered in the SYN-ACK
// fits it. SO_REUSEADDR is on, as Go's net.Listen sets it.
func (h *Host) ListenTCP(port uint16, o hostcfg.TCPOptions) (*TCPListener, error) {
	if err := h.validateTCP(o); err != nil {
		return nil, err
	}
	proto, v6only := h.listenProto()
	laddr := netip.AddrPortFrom(netip.IPv6Unspecified(), port)
	if !h.v6 {
		laddr = netip.AddrPortFrom(netip.IPv4Unspecified(), port)
	}
	wq := new(waiter.Queue)
	ep, terr := h.s.NewEndpoint(tcp.ProtocolNumber, proto, wq)
	if terr != nil {
		return nil, opError("listen", "tcp", laddr, terr)
	}
	l := &TCPListener{h: h, ep: ep, wq: wq, o: o, done: make(chan struct{})}
	if err := h.track(l); err != nil {
		ep.Close()
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: net.TCPAddrFromAddrPort(laddr), Err: err}
	}
	if proto == ipv6.ProtocolNumber {
		ep.SocketOptions().SetV6Only(v6only)
	}
	ep.SocketOptions().SetReuseAddress(true)
	setReceiveBuffer(ep, o.ReceiveBuffer)
	if terr := ep.Bind(tcpip.FullAddress{Port: port}); terr != nil {
		l.Close()
		return nil, opError("listen", "tcp", laddr, terr)
	}
	if terr := ep.Listen(listenBacklog); terr != nil {
		l.Close()
		return nil, opError("listen", "tcp", laddr, terr)
	}
	if a, terr := ep.GetLocalAddress(); terr == nil {
		laddr = netip.AddrPortFrom(laddr.Addr(), a.Port)
	}
	l.addr = net.TCPAddrFromAddrPort(laddr)
	return l, nil
}

// Addr returns the listener's address: the unspecified address of its
// family and the port, which is the chosen one when ListenTCP got 0.
func (l *TCPListener) Addr() net.Addr { return l.addr }

// Accept waits for the next connection, until ctx ends or the listener is
// closed (then the error wraps net.ErrClosed).
func (l *TCPListener) Accept(ctx context.Context) (*TCPConn, error) {
	entry, ch := waiter.NewChannelEntry(waiter.ReadableEvents | waiter.EventHUp | waiter.EventErr)
	l.wq.EventRegister(&entry)
	defer l.wq.EventUnregister(&entry)
	acceptErr := func(err error) error {
		return &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: err}
	}
	for {
		select {
		case <-l.done:
			return nil, acceptErr(net.ErrClosed)
		default:
		}
		ep, wq, terr := l.ep.Accept(nil)
		if terr == nil {
			c := newTCPConn(l.h, ep, wq)
			if err := l.h.track(c); err != nil {
				ep.Close()
				return nil, acceptErr(err)
			}
			// The receive buffer is set again: the connection inherited
			// the listener's size but, unlike on Linux, not its lock
			// against auto-tuning.
			if err := applyTCP(ep, l.o); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}
		if _, ok := terr.(*tcpip.ErrWouldBlock); !ok {
			select {
			case <-l.done:
				return nil, acceptErr(net.ErrClosed)
			default:
			}
			return nil, opError("accept", "tcp", l.addr.AddrPort(), terr)
		}
		select {
		case <-ctx.Done():
			return nil, acceptErr(ctx.Err())
		case <-l.done:
			return nil, acceptErr(net.ErrClosed)
		case <-ch:
		}
	}
}

// Close stops listening; pending Accepts return net.ErrClosed. It is
// idempotent and returns nil.
func (l *TCPListener) Close() error {
	l.h.untrack(l)
	l.closeEndpoint()
	return nil
}

func (l *TCPListener) closeEndpoint() {
	l.once.Do(func() {
		close(l.done)
		l.ep.Close()
	})
}

// TCPConn is a TCP connection of a Host. It is a net.Conn (through gVisor's
// gonet adapter) that also keeps its gVisor endpoint, for Info.
//
// Deadlines run on the wall clock (gonet arms them with package time), not
// on the Host's clock.
type TCPConn struct {
	h    *Host
	ep   tcpip.Endpoint
	c    *gonet.TCPConn
	once sync.Once
}

var _ net.Conn = (*TCPConn)(nil)

func newTCPConn(h *Host, ep tcpip.Endpoint, wq *waiter.Queue) *TCPConn {
	return &TCPConn{h: h, ep: ep, c: gonet.NewTCPConn(wq, ep)}
}

// Read implements net.Conn.
func (c *TCPConn) Read(b []byte) (int, error) { return c.c.Read(b) }

// Write implements net.Conn.
func (c *TCPConn) Write(b []byte) (int, error) { return c.c.Write(b) }

// CloseWrite shuts the sending side down: a FIN after the data written.
func (c *TCPConn) CloseWrite() error { return c.c.CloseWrite() }

// CloseRead shuts the receiving side down.
func (c *TCPConn) CloseRead() error { return c.c.CloseRead() }

// LocalAddr implements net.Conn.
func (c *TCPConn) LocalAddr() net.Addr { return c.c.LocalAddr() }

// RemoteAddr implements net.Conn.
func (c *TCPConn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

// SetDeadline implements net.Conn, on the wall clock.
func (c *TCPConn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// SetReadDeadline implements net.Conn, on the wall clock.
func (c *TCPConn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn, on the wall clock.
func (c *TCPConn) SetWriteDeadline(t time.Time) error { return c.c.SetWriteDeadline(t) }

// Close closes the connection (a FIN after data still queued, as close(2)).
// It is idempotent and returns nil.
func (c *TCPConn) Close() error {
	c.h.untrack(c)
	c.closeEndpoint()
	return nil
}

// Reset ends the connection at once with a RST to the peer (gVisor's
// abort, as SO_LINGER 0 and close(2) on Linux): pending and later reads
// and writes fail, and what was queued is dropped. Close is still to be
// called. It returns nil.
func (c *TCPConn) Reset() error {
	c.ep.Abort()
	return nil
}

func (c *TCPConn) closeEndpoint() {
	// gVisor's Endpoint.Close must be called once.
	c.once.Do(func() { c.c.Close() })
}

var ccStates = map[tcpip.CongestionControlState]string{
	tcpip.Open:         "open",
	tcpip.RTORecovery:  "rto-recovery",
	tcpip.FastRecovery: "fast-recovery",
	tcpip.SACKRecovery: "sack-recovery",
	tcpip.Disorder:     "disorder",
}

// Info returns a snapshot of the connection's TCP state; safe at any time,
// also after Close (then the counters are final).
func (c *TCPConn) Info() netif.TCPInfo {
	var ti tcpip.TCPInfoOption
	_ = c.ep.GetSockOpt(&ti) // never fails for a TCP endpoint
	var cc tcpip.CongestionControlOption
	_ = c.ep.GetSockOpt(&cc)
	info := netif.TCPInfo{
		State:       tcp.EndpointState(ti.State).String(),
		CC:          string(cc),
		CCState:     ccStates[ti.CcState],
		SRTT:        ti.RTT,
		RTTVar:      ti.RTTVar,
		RTO:         ti.RTO,
		Cwnd:        ti.SndCwnd,
		Ssthresh:    ti.SndSsthresh,
		ReorderSeen: ti.ReorderSeen,
	}
	if st, ok := c.ep.Stats().(*tcp.Stats); ok {
		info.SegmentsSent = st.SegmentsSent.Value()
		info.SegmentsReceived = st.SegmentsReceived.Value()
		info.Retransmits = st.SendErrors.Retransmits.Value()
		info.FastRetransmits = st.SendErrors.FastRetransmit.Value()
		info.Timeouts = st.SendErrors.Timeouts.Value()
	}
	return info
}
