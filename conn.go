package netjam

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/summary"
)

// conn is a connection made through a Path: the near stack's connection,
// with the real remote address and its byte counts.
type conn struct {
	net.Conn
	p       *Path
	network string
	remote  net.Addr
	info    func() netif.TCPInfo // nil for UDP
	opened  time.Time

	sent, received atomic.Uint64
	once           sync.Once
	err            error
}

// track wraps c, registers it with the path and returns it.
func (p *Path) track(c net.Conn, info func() netif.TCPInfo, remote net.Addr) (net.Conn, error) {
	network := "udp"
	if info != nil {
		network = "tcp"
	}
	w := &conn{Conn: c, p: p, network: network, remote: remote, info: info, opened: time.Now()}
	if !p.keep(w) {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: remote, Err: ErrClosed}
	}
	return w, nil
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.received.Add(uint64(n))
	return n, err
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(uint64(n))
	return n, err
}

// RemoteAddr returns the real address the connection reaches.
func (c *conn) RemoteAddr() net.Addr { return c.remote }

// Close closes the connection (gracefully for TCP); safe more than once.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.err = c.Conn.Close()
		c.p.forget(c)
	})
	return c.err
}

// CloseWrite shuts down the sending side of a TCP connection.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// CloseRead shuts down the receiving side of a TCP connection.
func (c *conn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return errors.ErrUnsupported
}

// Stats is a Path's state: each direction as summary.json has it, and
// the connections open through it.
type Stats struct {
	// Uplink (from the program's side to the real network) and Downlink:
	// their configuration and counters (packets, bytes, drops by reason,
	// the delay they added).
	Uplink, Downlink summary.LinkSummary
	// Conns are the connections made with DialContext and accepted from
	// Listen that are still open, oldest first.
	Conns []ConnStats
	// Relay counts what the path's far side relayed to real addresses,
	// and what it could not (a refused connection is a dial error there).
	Relay RelayStats
}

// RelayStats are the counters of a Path's far side, per protocol: the
// connections (TCP) and sessions (UDP) it relayed to real addresses, those
// it could not reach, and their bytes. It is the relay's own type, a plain
// struct of counters (no gVisor type in it), named here so that a program
// reads it with no other import.
type RelayStats = hostcfg.RelayStats

// RelayCounters are one protocol's counters in RelayStats.
type RelayCounters = hostcfg.RelayCounters

// ConnStats is one connection through a Path. The TCP fields are the near
// stack's view: its retransmissions are what the path made it do.
type ConnStats struct {
	Network        string // tcp or udp
	Local, Remote  string // the near side's address; the real address reached (or, from Listen, the real client)
	Age            time.Duration
	BytesSent      uint64 // written by the program
	BytesReceived  uint64 // read by the program
	SRTT, RTO      time.Duration
	Cwnd           uint32
	Retransmits    uint64
	FastRetransmit uint64
	Timeouts       uint64
}

// Stats returns the path's state now.
func (p *Path) Stats() Stats {
	links := p.b.Links()
	st := Stats{Uplink: links[0], Downlink: links[1], Relay: p.b.Relay()}
	p.mu.Lock()
	var cs []*conn
	for c := range p.closers {
		if c, ok := c.(*conn); ok {
			cs = append(cs, c)
		}
	}
	p.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool { return cs[i].opened.Before(cs[j].opened) })
	for _, c := range cs {
		s := ConnStats{Network: c.network, Local: c.LocalAddr().String(), Remote: c.remote.String(), Age: time.Since(c.opened),
			BytesSent: c.sent.Load(), BytesReceived: c.received.Load()}
		if c.info != nil {
			in := c.info()
			s.SRTT, s.RTO, s.Cwnd = in.SRTT, in.RTO, in.Cwnd
			s.Retransmits, s.FastRetransmit, s.Timeouts = in.Retransmits, in.FastRetransmits, in.Timeouts
		}
		st.Conns = append(st.Conns, s)
	}
	return st
}

// ListenPacket opens a UDP socket on the path's near side (network udp,
// udp4 or udp6; address ":0" or ":PORT"). What it writes to a real address
// crosses the path's uplink and is sent from a real socket of the far
// side; the replies cross the downlink. ReadFrom returns the real address
// a datagram came from, so that protocols over UDP (QUIC) see the
// addresses they wrote to.
func (p *Path) ListenPacket(network, address string) (net.PacketConn, error) {
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	port, err := listenPort(network, address)
	if err != nil {
		return nil, err
	}
	pc, err := p.b.Client().ListenUDP(port)
	if err != nil {
		return nil, err
	}
	w := &packetConn{PacketConn: pc, p: p}
	if !p.keep(w) {
		return nil, &net.OpError{Op: "listen", Net: network, Err: ErrClosed}
	}
	return w, nil
}

// listenPort returns the port of a listening address: its host part must
// be empty or unspecified (the near side has addresses of its own).
func listenPort(network, address string) (uint16, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return 0, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	if host != "" {
		if a, err := netip.ParseAddr(host); err != nil || !a.IsUnspecified() {
			return 0, &net.OpError{Op: "listen", Net: network, Err: errors.New("netjam: listen on \":PORT\": the near side has its own addresses")}
		}
	}
	pn, err := net.DefaultResolver.LookupPort(context.Background(), network, port)
	if err != nil {
		return 0, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	return uint16(pn), nil
}

// packetConn is a UDP socket on the near side that speaks real addresses.
type packetConn struct {
	net.PacketConn
	p    *Path
	once sync.Once
	err  error
}

// ReadFrom returns a datagram and the real address it came from.
func (c *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, addr, err := c.PacketConn.ReadFrom(b)
		if err != nil {
			return n, addr, err
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok {
			return n, addr, nil
		}
		if real, ok := c.p.toReal(ua.AddrPort()); ok {
			return n, net.UDPAddrFromAddrPort(real), nil
		}
		// Nothing else can reach the near side: drop what does not map.
	}
}

// WriteTo sends b to the real address addr across the path.
func (c *packetConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	var ap netip.AddrPort
	switch a := addr.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		var err error
		if ap, err = netip.ParseAddrPort(addr.String()); err != nil {
			return 0, &net.OpError{Op: "write", Net: "udp", Addr: addr, Err: err}
		}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	v, err := c.p.toVirtual(ap)
	if err != nil {
		return 0, &net.OpError{Op: "write", Net: "udp", Addr: addr, Err: err}
	}
	return c.PacketConn.WriteTo(b, net.UDPAddrFromAddrPort(v))
}

// Close closes the socket; safe more than once.
func (c *packetConn) Close() error {
	c.once.Do(func() {
		c.err = c.PacketConn.Close()
		c.p.forget(c)
	})
	return c.err
}
