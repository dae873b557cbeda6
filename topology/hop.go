package topology

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/time/rate"

	"github.com/netjam/netjam/impair"
)

// Hop is a router in front of a link's direction, as a node: what a
// router forwarding onto that link does to each packet (RFC 1812, as
// Linux's ip_forward and ip6_forward do it), in this order:
//
//   - a packet whose TTL (hop limit) would reach 0 here is dropped and
//     answered with ICMP "time exceeded", so traceroute sees the hop;
//   - a packet larger than the link's MTU (a GSO packet's segments,
//     each) is dropped and answered with ICMP "fragmentation needed"
//     (IPv4 with Don't Fragment set) or ICMPv6 "packet too big", which
//     path MTU discovery needs; an IPv4 packet that may be fragmented is
//     cut into fragments that fit;
//   - the rest goes on with its TTL one lower (the IPv4 header checksum
//     updated).
//
// Its ICMP errors leave by a node of their own (Errors), from the hop's
// address of the packet's family, to the packet's sender, quoting the
// start of the packet; none answers an ICMP error, a fragment after the
// first, or a packet to or from an address that is not unicast, and at
// most errorRate a second leave (with a burst of errorBurst), as
// Linux's icmp_msgs_per_sec bounds them. Anything it cannot read (not
// IPv4 or IPv6) goes on untouched.
//
// A hop adds no goroutine and, on the forwarding path, allocates nothing;
// an ICMP error (rare, and bounded) is built in a packet of the pool.
type Hop struct {
	name         string
	mtu          int
	addr4, addr6 netip.Addr
	pool         *impair.Pool
	out, errs    Port
	limit        *rate.Limiter

	expired, tooBig, fragmented, errorsSent, errorsLimited atomic.Uint64
}

// Bounds of a hop's ICMP errors.
const (
	errorRate  = 1000 // a second
	errorBurst = 50
	// icmpQuote4 is the most of a packet an ICMP error quotes: what
	// fits a 576-byte datagram (RFC 1812 §4.3.2.3); icmpQuote6, a
	// 1280-byte one (RFC 4443 §2.4).
	icmpQuote4 = 576 - 20 - 8
	icmpQuote6 = 1280 - 40 - 8
)

// NewHop returns a hop in front of a link of MTU mtu (0: no limit of its
// own), answering from addrs (at most one of each family; an error of a
// family it has no address of is not sent). Its fragments and errors come
// from pool.
func NewHop(name string, mtu int, addrs []netip.Addr, pool *impair.Pool) *Hop {
	h := &Hop{name: name, mtu: mtu, pool: pool, limit: rate.NewLimiter(errorRate, errorBurst)}
	for _, a := range addrs {
		if a.Is4() {
			h.addr4 = a
		} else {
			h.addr6 = a
		}
	}
	return h
}

// Node returns the hop as a node of a graph: it takes what reaches the
// link, GSO packets whole and partial checksums as they are.
func (h *Hop) Node() Node {
	return Node{Name: h.name, In: h, Out: &h.out, Accepts: Accepts{GSO: Yes, Partial: true}}
}

// Errors returns the node its ICMP errors leave by, a source: link it to
// where they go back towards the senders.
func (h *Hop) Errors() Node { return Node{Name: h.name + " errors", Out: &h.errs} }

// HopStats are what a hop counted.
type HopStats struct {
	// Expired packets had no TTL left; TooBig were larger than the MTU
	// and could not be fragmented; Fragmented were cut into fragments.
	Expired    uint64 `json:"ttl_expired"`
	TooBig     uint64 `json:"too_big"`
	Fragmented uint64 `json:"fragmented"`
	// ErrorsSent are the ICMP errors sent; ErrorsLimited those not sent
	// for the rate limit.
	ErrorsSent    uint64 `json:"icmp_errors_sent"`
	ErrorsLimited uint64 `json:"icmp_errors_limited"`
}

// Stats returns the hop's counters.
func (h *Hop) Stats() HopStats {
	return HopStats{Expired: h.expired.Load(), TooBig: h.tooBig.Load(), Fragmented: h.fragmented.Load(),
		ErrorsSent: h.errorsSent.Load(), ErrorsLimited: h.errorsLimited.Load()}
}

// Push forwards p as a router would (see Hop).
func (h *Hop) Push(now time.Time, p *impair.Packet) {
	b := p.Data
	v4 := len(b) >= 20 && b[0]>>4 == 4
	if !v4 && !(len(b) >= 40 && b[0]>>4 == 6) {
		h.out.Push(now, p)
		return
	}
	ttl := b[7] // IPv6's hop limit
	if v4 {
		ttl = b[8]
	}
	if ttl <= 1 {
		h.expire(now, p)
		return
	}
	if h.mtu > 0 && p.SegmentSize() > h.mtu {
		_, _, gso := p.GSO()
		if v4 && b[6]&0x40 == 0 && !gso {
			impair.DecrementTTL(b)
			h.fragment(now, p)
			return
		}
		h.tooBig.Add(1)
		h.sendError(now, b, false)
		p.Release()
		return
	}
	impair.DecrementTTL(b)
	h.out.Push(now, p)
}

// expire drops p, whose TTL ran out here, and answers it.
func (h *Hop) expire(now time.Time, p *impair.Packet) {
	h.expired.Add(1)
	h.sendError(now, p.Data, true)
	p.Release()
}

// sendError sends the ICMP error for packet b: time exceeded (expired)
// or fragmentation needed / packet too big, unless b must not be
// answered, the hop has no address of its family, or the rate limit
// holds it back.
func (h *Hop) sendError(now time.Time, b []byte, expired bool) {
	if !answerable(b) {
		return
	}
	v4 := b[0]>>4 == 4
	from := h.addr6
	if v4 {
		from = h.addr4
	}
	if !from.IsValid() {
		return
	}
	if !h.limit.AllowN(now, 1) {
		h.errorsLimited.Add(1)
		return
	}
	var e []byte
	if v4 {
		e = icmp4Error(from, b, expired, h.mtu)
	} else {
		e = icmp6Error(from, b, expired, h.mtu)
	}
	if e == nil || len(e) > h.pool.Size() {
		return
	}
	h.errorsSent.Add(1)
	h.errs.Push(now, h.pool.Copy(e))
}

// answerable reports whether a router may answer packet b with an ICMP
// error (RFC 1812 §4.3.2.7, RFC 4443 §2.4 (e)): not an ICMP error itself,
// not a fragment after the first, from and to unicast addresses.
func answerable(b []byte) bool {
	var src, dst netip.Addr
	if b[0]>>4 == 4 {
		src, dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
		ihl := int(b[0]&0x0f) * 4
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
			return false // a later fragment
		}
		if b[9] == 1 && len(b) > ihl {
			switch b[ihl] { // ICMP errors: unreachable, source quench, redirect, time exceeded, parameter problem
			case 3, 4, 5, 11, 12:
				return false
			}
		}
	} else {
		src, dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
		if b[6] == 58 && len(b) > 40 && b[40] < 128 {
			return false // an ICMPv6 error
		}
	}
	unicast := func(a netip.Addr) bool {
		return !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	return unicast(src) && unicast(dst)
}

// icmp4Error builds the ICMP error from router address from for the IPv4
// packet b: time exceeded in transit, or destination unreachable,
// fragmentation needed, with next-hop MTU mtu (RFC 1191).
func icmp4Error(from netip.Addr, b []byte, expired bool, mtu int) []byte {
	// A GSO packet's length field may say more than the quote holds:
	// the receiver reads the headers and ports.
	quote := b[:min(len(b), icmpQuote4)]
	e := make([]byte, 20+8+len(quote))
	e[0], e[1] = 0x45, 0xc0 // internetwork control
	binary.BigEndian.PutUint16(e[2:], uint16(len(e)))
	e[8], e[9] = 64, 1
	f := from.As4()
	copy(e[12:16], f[:])
	copy(e[16:20], b[12:16])
	binary.BigEndian.PutUint16(e[10:], checksum(e[:20]))
	m := e[20:]
	if expired {
		m[0] = 11
	} else {
		m[0], m[1] = 3, 4
		binary.BigEndian.PutUint16(m[6:], uint16(mtu))
	}
	copy(m[8:], quote)
	binary.BigEndian.PutUint16(m[2:], checksum(m))
	return e
}

// icmp6Error builds the ICMPv6 error from router address from for the
// IPv6 packet b: time exceeded (hop limit), or packet too big with the
// link's MTU.
func icmp6Error(from netip.Addr, b []byte, expired bool, mtu int) []byte {
	quote := b[:min(len(b), icmpQuote6)]
	m := icmp.Message{Type: ipv6.ICMPTypeTimeExceeded, Body: &icmp.TimeExceeded{Data: quote}}
	if !expired {
		m = icmp.Message{Type: ipv6.ICMPTypePacketTooBig, Body: &icmp.PacketTooBig{MTU: mtu, Data: quote}}
	}
	dst := netip.AddrFrom16([16]byte(b[8:24]))
	body, err := m.Marshal(icmp.IPv6PseudoHeader(from.AsSlice(), dst.AsSlice()))
	if err != nil {
		return nil
	}
	e := make([]byte, 40+len(body))
	e[0] = 0x60
	binary.BigEndian.PutUint16(e[4:], uint16(len(body)))
	e[6], e[7] = 58, 64
	f := from.As16()
	copy(e[8:24], f[:])
	copy(e[24:40], b[8:24])
	copy(e[40:], body)
	return e
}

// fragment cuts the IPv4 packet p, larger than the MTU and allowed to be
// fragmented, into fragments that fit (RFC 791), and forwards them.
func (h *Hop) fragment(now time.Time, p *impair.Packet) {
	if p.Partial() {
		p.FinishChecksum()
	}
	b := p.Data
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if ihl < 20 || total > len(b) || total <= ihl {
		h.tooBig.Add(1)
		p.Release()
		return
	}
	per := (h.mtu - ihl) &^ 7
	if per <= 0 {
		h.tooBig.Add(1)
		p.Release()
		return
	}
	h.fragmented.Add(1)
	flags := binary.BigEndian.Uint16(b[6:8])
	offset, moreAfter := int(flags&0x1fff), flags&0x2000 != 0
	payload := b[ihl:total]
	for start := 0; start < len(payload); start += per {
		end := min(start+per, len(payload))
		f := h.pool.Get(ihl + end - start)
		copy(f.Data, b[:ihl])
		copy(f.Data[ihl:], payload[start:end])
		binary.BigEndian.PutUint16(f.Data[2:], uint16(len(f.Data)))
		fl := uint16(offset+start/8) & 0x1fff
		if end < len(payload) || moreAfter {
			fl |= 0x2000
		}
		binary.BigEndian.PutUint16(f.Data[6:], fl)
		binary.BigEndian.PutUint16(f.Data[10:], 0)
		binary.BigEndian.PutUint16(f.Data[10:], checksum(f.Data[:ihl]))
		f.Arrival = p.Arrival
		h.out.Push(now, f)
	}
	p.Release()
}

// checksum is the Internet checksum of b (RFC 1071), the field it holds
// counted as it is.
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
