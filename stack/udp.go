package stack

import (
	"net"
	"net/netip"
	"sync"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/adapters/gonet"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv6"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/udp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/waiter"
)

// udpConn is a UDP socket of a Host: gonet's UDPConn, closed by the Host's
// Close if not before. It is a net.Conn when connected (DialUDP) and a
// net.PacketConn either way. Deadlines run on the wall clock.
type udpConn struct {
	*gonet.UDPConn
	h    *Host
	ep   tcpip.Endpoint // ListenUDP's, for ReceiveDrops; nil for DialUDP's
	once sync.Once
}

// Close implements net.Conn; it is idempotent and returns nil.
func (c *udpConn) Close() error {
	c.h.untrack(c)
	c.closeEndpoint()
	return nil
}

func (c *udpConn) closeEndpoint() { c.once.Do(func() { c.UDPConn.Close() }) }

// ListenUDP opens a UDP socket on port (0: an ephemeral one) of every
// address of the host (dual-stack when the host has both families), for
// ReadFrom and WriteTo. Datagrams larger than the path MTU allows are
// fragmented, as on Linux.
func (h *Host) ListenUDP(port uint16) (net.PacketConn, error) {
	proto, v6only := h.listenProto()
	laddr := netip.AddrPortFrom(netip.IPv6Unspecified(), port)
	if proto != ipv6.ProtocolNumber {
		laddr = netip.AddrPortFrom(netip.IPv4Unspecified(), port)
	}
	var wq waiter.Queue
	ep, terr := h.s.NewEndpoint(udp.ProtocolNumber, proto, &wq)
	if terr != nil {
		return nil, opError("listen", "udp", laddr, terr)
	}
	c := &udpConn{UDPConn: gonet.NewUDPConn(&wq, ep), h: h}
	if err := h.track(c); err != nil {
		ep.Close()
		return nil, &net.OpError{Op: "listen", Net: "udp", Addr: net.UDPAddrFromAddrPort(laddr), Err: err}
	}
	if proto == ipv6.ProtocolNumber {
		ep.SocketOptions().SetV6Only(v6only)
	}
	if terr := ep.Bind(tcpip.FullAddress{Port: port}); terr != nil {
		c.Close()
		return nil, opError("listen", "udp", laddr, terr)
	}
	// A measuring receiver's buffer holds seconds of a flow, not the
	// default's fraction of one: a loaded machine that reads late must
	// not lose what the path delivered (see ReceiveDrops).
	ep.SocketOptions().SetReceiveBufferSize(listenReceiveBuffer, true)
	c.ep = ep
	return c, nil
}

// listenReceiveBuffer is ListenUDP's receive buffer: gVisor's maximum,
// 4 MiB, about 2800 datagrams of 1500 bytes.
const listenReceiveBuffer = 4 << 20

// ReceiveDrops returns how many datagrams arrived at the socket and were
// dropped because its receive buffer was full (flows.ReceiveDropper): the
// machine did not read them in time.
func (c *udpConn) ReceiveDrops() uint64 {
	if c.ep == nil {
		return 0
	}
	st, ok := c.ep.Stats().(*tcpip.TransportEndpointStats)
	if !ok {
		return 0
	}
	return st.ReceiveErrors.ReceiveBufferOverflow.Value()
}

// DialUDP opens a UDP socket connected to raddr, from an ephemeral port:
// Write sends to raddr, Read receives only from it.
func (h *Host) DialUDP(raddr netip.AddrPort) (net.Conn, error) {
	return h.DialUDPFrom(0, raddr)
}

// DialUDPFrom is DialUDP from local port lport (0: an ephemeral one; see
// DialTCPFrom).
func (h *Host) DialUDPFrom(lport uint16, raddr netip.AddrPort) (net.Conn, error) {
	raddr = netip.AddrPortFrom(raddr.Addr().Unmap(), raddr.Port())
	proto, err := h.netProto(raddr.Addr())
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "udp", Addr: net.UDPAddrFromAddrPort(raddr), Err: err}
	}
	var wq waiter.Queue
	ep, terr := h.s.NewEndpoint(udp.ProtocolNumber, proto, &wq)
	if terr != nil {
		return nil, opError("dial", "udp", raddr, terr)
	}
	c := &udpConn{UDPConn: gonet.NewUDPConn(&wq, ep), h: h}
	if err := h.track(c); err != nil {
		ep.Close()
		return nil, &net.OpError{Op: "dial", Net: "udp", Addr: net.UDPAddrFromAddrPort(raddr), Err: err}
	}
	if lport != 0 {
		if terr := ep.Bind(tcpip.FullAddress{Port: lport}); terr != nil {
			c.Close()
			return nil, opError("dial", "udp", raddr, terr)
		}
	}
	if terr := ep.Connect(fullAddr(raddr)); terr != nil {
		c.Close()
		return nil, opError("dial", "udp", raddr, terr)
	}
	return c, nil
}
