package stack

import (
	"errors"
	"syscall"
	"time"

	csum "github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/checksum"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
	"go.uber.org/zap"

	"github.com/netjam/netjam/netif"
)

// The down direction of a UDP session: the target's datagrams, read in
// batches (recvmmsg) and sent to the client as IP packets the relay builds
// itself, without gVisor's endpoint, route and IP layer, which took a
// quarter of what a datagram cost netjam; the read, one system call and
// one wake-up per datagram, took half. A datagram that does not fit the
// host's MTU whole goes through gVisor, which fragments it.
//
// What the relay builds is what gVisor's UDP would send from the
// session's endpoint: the session's addresses and ports, TTL and hop limit
// 64, TOS and traffic class 0, IPv4's Don't Fragment set (gVisor's default
// path MTU discovery, as Linux's), and a checksummed UDP header.

const (
	// udpDownSlots is how many datagrams one read takes: each has a
	// slot for the largest datagram, so a batch's memory (8 times 64
	// KiB) is taken from a pool, and from the Budget, only while the
	// batch is read and sent, never while the session waits.
	udpDownSlots = 8
	// udpTTL is gVisor's default TTL and hop limit.
	udpTTL = 64
)

// downHeader is the IP and UDP headers of a session's datagrams toward
// the client, built once and completed per datagram; only the down
// direction's goroutine uses it.
type downHeader struct {
	b      [header.IPv6MinimumSize + header.UDPMinimumSize]byte
	n      int    // bytes of b in use: the IP header and the UDP header
	v4     bool   //
	pseudo uint16 // the pseudo-header's sum without the length
	id     uint16 // IPv4's next identification
	vec    [2][]byte
}

// newDownHeader returns the headers of datagrams from the session's
// destination to its client.
func newDownHeader(k udpKey) *downHeader {
	h := &downHeader{}
	from, to := k.dst, k.src
	src, dst := tcpipAddr(from.Addr()), tcpipAddr(to.Addr())
	if h.v4 = from.Addr().Is4(); h.v4 {
		h.n = header.IPv4MinimumSize + header.UDPMinimumSize
		header.IPv4(h.b[:]).Encode(&header.IPv4Fields{TTL: udpTTL, Protocol: uint8(header.UDPProtocolNumber),
			Flags: header.IPv4FlagDontFragment, SrcAddr: src, DstAddr: dst})
	} else {
		h.n = header.IPv6MinimumSize + header.UDPMinimumSize
		header.IPv6(h.b[:]).Encode(&header.IPv6Fields{TransportProtocol: header.UDPProtocolNumber, HopLimit: udpTTL,
			SrcAddr: src, DstAddr: dst})
	}
	u := header.UDP(h.b[h.n-header.UDPMinimumSize : h.n])
	u.SetSourcePort(from.Port())
	u.SetDestinationPort(to.Port())
	h.pseudo = header.PseudoHeaderChecksum(header.UDPProtocolNumber, src, dst, 0)
	return h
}

// packet completes the headers for payload p and returns the packet as
// slices (valid until the next call).
func (h *downHeader) packet(p []byte) [][]byte {
	ipLen := h.n - header.UDPMinimumSize
	udpLen := uint16(header.UDPMinimumSize + len(p))
	if h.v4 {
		ip := header.IPv4(h.b[:ipLen])
		ip.SetTotalLength(uint16(h.n + len(p)))
		ip.SetID(h.id)
		h.id++
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	} else {
		header.IPv6(h.b[:ipLen]).SetPayloadLength(udpLen)
	}
	u := header.UDP(h.b[ipLen:h.n])
	u.SetLength(udpLen)
	u.SetChecksum(0)
	xsum := csum.Combine(h.pseudo, udpLen)
	xsum = csum.Checksum(p, xsum)
	xsum = ^u.CalculateChecksum(xsum)
	if xsum == 0 {
		xsum = 0xffff // RFC 768: a zero would mean none
	}
	u.SetChecksum(xsum)
	h.vec[0], h.vec[1] = h.b[:h.n], p
	return h.vec[:]
}

// toClient sends the target's datagram p to the client: built here when
// it fits the MTU whole, through gVisor otherwise.
func (u *udpSession) toClient(p []byte) {
	l := u.r.h.link
	if u.hdr != nil && u.hdr.n+len(p) <= int(l.MTU()) {
		l.emit(u.hdr.packet(p))
		u.r.udpN.down.Add(uint64(len(p)))
		return
	}
	if _, err := u.in.Write(p); err == nil {
		u.r.udpN.down.Add(uint64(len(p)))
	} else {
		u.drop(dropToClient, err)
	}
}

// down carries the target's datagrams to the client until the target's
// socket fails or is closed, then wakes the up direction.
func (u *udpSession) down() {
	r := u.r
	defer r.wg.Done()
	defer close(u.downDone) // wakes the other direction
	u.hdr = newDownHeader(u.key)
	var err error
	if tc, ok := u.out.(*targetConn); ok && tc.rc != nil {
		err = u.readBatches(tc.rc)
	} else {
		err = u.readEach()
	}
	if !r.isClosed() {
		r.log.Debug("udp relay failed: the target's socket", zap.Stringer("target", u.target), zap.Error(err))
	}
}

// readEach carries the target's datagrams one read at a time: a target
// that is not a socket (a test's Dial).
func (u *udpSession) readEach() error {
	r := u.r
	bp := r.udpB.Get().(*[]byte)
	defer r.udpB.Put(bp)
	for {
		n, err := u.out.Read(*bp)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				continue // an ICMP error from the target: keep the session
			}
			return err
		}
		u.touch()
		u.toClient((*bp)[:n])
	}
}

// busyPause is how long the down direction leaves the target's socket
// unread, at a time, while the path toward the clients is full.
const busyPause = 50 * time.Microsecond

// waitForPath returns once the path toward the clients can take more
// (hostcfg.RelayConfig.Busy) or the relay closed.
func (u *udpSession) waitForPath() {
	busy := u.r.cfg.Busy
	if busy == nil {
		return
	}
	for busy() && !u.r.isClosed() {
		time.Sleep(busyPause)
	}
}

// emit hands OutputHeld (else OutputGSO or Output) a packet the host's
// relay built itself (a UDP datagram of a session toward its client), as
// a packet gVisor sends reaches them: counted, and lost once the link is
// shut.
func (l *link) emit(pkt [][]byte) {
	if !l.enter() {
		l.outDropped.Add(1)
		return
	}
	defer l.exit()
	size := 0
	for _, s := range pkt {
		size += len(s)
	}
	// The session's down goroutine may be held back (see
	// HostConfig.OutputHeld): it holds no connection of the host, and
	// nothing the path does waits for it. Held, it leaves the target's
	// socket unread, whose kernel drops what it cannot hold
	// (from_target), instead of the path dropping after the work at an
	// input whose last places a batch overran.
	l.send(pkt, size, netif.GSO{}, true)
}
