package stack

import (
	"net/netip"
	"sync"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	csum "github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/checksum"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
	"golang.org/x/net/ipv4"
)

// The up direction's fast path. Once a UDP session is open, its
// datagrams need nothing of gVisor but their payload: the host's Inject
// recognises an unfragmented IPv4 or IPv6 UDP datagram of an open session,
// checks it as gVisor's UDP would (header.UDPValid: lengths and checksum),
// and hands its payload to the session's queue, which the session's up
// direction writes to the target straight from the queue's memory. Half
// of what a datagram cost netjam went to gVisor's delivery (the NIC, IP
// and UDP layers, the endpoint's queue and its wake-ups).
//
// Everything else takes gVisor's path as before: a session's first
// datagram (which opens it), fragments, IPv4 options, IPv6 extension
// headers, a length that disagrees with the packet's, a bad checksum
// (which gVisor then counts), and anything for no open session. Datagrams
// of one session may take either path; the up direction writes what
// gVisor queued before what the fast path did, so only a datagram that
// fell back to gVisor behind fast ones can be reordered.
//
// The queue is bounded (udpQueueBytes and udpQueueLen) and, as the
// endpoint's receive buffer is for gVisor's path, waited for when full
// (udpSession.admit's rules): a path with no reason to drop loses nothing
// in the relay.

const (
	// udpQueueBytes is the memory of a session's fast-path queue:
	// more than gVisor's endpoint holds (212992 bytes), so that the
	// fast path waits no more often than gVisor's did. Charged to the
	// Budget when the session's first fast datagram comes.
	udpQueueBytes = 256 << 10
	// udpQueueLen bounds its datagrams (small ones).
	udpQueueLen = 1024
)

// udpQueue is a session's queue of datagram payloads: a ring of bytes
// holding them back to back (one never wraps around the end), and a ring
// of their places. One producer at a time puts (Inject's goroutine, under
// mu), one consumer (the session's up direction) peeks a batch, writes it
// from the queue's memory, and releases it: what it holds stays queued,
// so the producer never writes over it.
type udpQueue struct {
	mu     sync.Mutex // guards everything below; buf's bytes between put and release belong to the consumer
	buf    []byte
	ents   []udpEnt
	first  int  // index in ents of the oldest datagram
	n      int  // datagrams queued, those peeked included
	head   int  // offset in buf of the oldest datagram
	tail   int  // offset in buf after the newest
	closed bool // the session ended: put refuses
}

type udpEnt struct{ off, n int32 }

func newUDPQueue() *udpQueue {
	return &udpQueue{buf: make([]byte, udpQueueBytes), ents: make([]udpEnt, udpQueueLen)}
}

// at returns where a datagram of n bytes goes, or -1 when it does not fit.
func (q *udpQueue) at(n int) int {
	switch {
	case q.n == len(q.ents):
		return -1
	case q.n == 0:
		q.head, q.tail = 0, 0
		if n <= len(q.buf) {
			return 0
		}
	case q.tail > q.head:
		// Free: after tail, and before head.
		if q.tail+n <= len(q.buf) {
			return q.tail
		}
		if n <= q.head {
			return 0
		}
	default:
		// Wrapped: free between tail and head.
		if q.tail+n <= q.head {
			return q.tail
		}
	}
	return -1
}

// put queues a copy of p. It reports whether it did, whether the queue
// was empty before (the consumer may be waiting for it), and whether the
// queue is closed.
func (q *udpQueue) put(p []byte) (ok, wasEmpty, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false, false, true
	}
	off := q.at(len(p))
	if off < 0 {
		return false, false, false
	}
	copy(q.buf[off:], p)
	q.ents[(q.first+q.n)%len(q.ents)] = udpEnt{int32(off), int32(len(p))}
	wasEmpty = q.n == 0
	q.n++
	q.tail = off + len(p)
	return true, wasEmpty, false
}

// fits reports whether a datagram of n bytes fits now.
func (q *udpQueue) fits(n int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed || q.at(n) >= 0
}

// peek sets ms' buffers to the oldest queued datagrams, up to len(ms),
// and returns how many; they stay queued until release.
func (q *udpQueue) peek(ms []ipv4.Message) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(q.n, len(ms))
	for i := range k {
		e := q.ents[(q.first+i)%len(q.ents)]
		ms[i].Buffers[0] = q.buf[e.off : e.off+e.n]
	}
	return k
}

// release drops the k oldest datagrams, which peek returned.
func (q *udpQueue) release(k int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.first = (q.first + k) % len(q.ents)
	q.n -= k
	if q.n > 0 {
		q.head = int(q.ents[q.first].off)
	}
}

// close refuses further puts and returns how many datagrams it held.
func (q *udpQueue) close() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	n := q.n
	q.n, q.first = 0, 0
	return n
}

// parseUDP parses pkt, an IP packet whose header fits (see
// networkProtocol), as an unfragmented UDP datagram: its session key and
// payload. fast says that gVisor would take it as it is, the checks of
// gVisor's IPv4 or IPv6 layer and of its UDP (header.UDPValid) passed,
// and nothing in it needs more (IPv4 options, IPv6 extension headers,
// padding after the datagram, a zero TTL): the fast path may take it.
// ok false: not an unfragmented UDP datagram whose header fits.
func parseUDP(pkt []byte) (k udpKey, payload []byte, fast, ok bool) {
	var u header.UDP
	var src, dst tcpip.Address
	var proto tcpip.NetworkProtocolNumber
	switch pkt[0] >> 4 {
	case 4:
		ip := header.IPv4(pkt)
		if ip.TransportProtocol() != header.UDPProtocolNumber || ip.More() || ip.FragmentOffset() != 0 {
			return k, nil, false, false
		}
		hl := int(ip.HeaderLength())
		if len(pkt) < hl+header.UDPMinimumSize {
			return k, nil, false, false
		}
		u = pkt[hl:]
		k.src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(pkt[12:16])), u.SourcePort())
		k.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(pkt[16:20])), u.DestinationPort())
		fast = hl == header.IPv4MinimumSize && int(ip.TotalLength()) == len(pkt) && ip.TTL() != 0 &&
			csum.Checksum(pkt[:hl], 0) == 0xffff
		src, dst, proto = ip.SourceAddress(), ip.DestinationAddress(), header.IPv4ProtocolNumber
	default:
		if len(pkt) < header.IPv6MinimumSize+header.UDPMinimumSize || header.IPv6(pkt).NextHeader() != uint8(header.UDPProtocolNumber) {
			return k, nil, false, false
		}
		ip := header.IPv6(pkt)
		u = pkt[header.IPv6MinimumSize:]
		k.src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(pkt[8:24])), u.SourcePort())
		k.dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(pkt[24:40])), u.DestinationPort())
		fast = int(ip.PayloadLength())+header.IPv6MinimumSize == len(pkt)
		src, dst, proto = ip.SourceAddress(), ip.DestinationAddress(), header.IPv6ProtocolNumber
	}
	payload = u[header.UDPMinimumSize:]
	if fast {
		// gVisor trims a datagram shorter than what carries it; the
		// fast path takes only one that fills it.
		fast = int(u.Length()) == len(u)
	}
	if fast {
		lengthOK, csumOK := header.UDPValid(u, func() uint16 { return csum.Checksum(payload, 0) },
			uint16(len(payload)), proto, src, dst, false)
		fast = lengthOK && csumOK
	}
	return k, payload, fast, true
}
