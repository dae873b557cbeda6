package impair

import "encoding/binary"

// ECN codepoints, the two low bits of the IPv4 TOS byte and of the IPv6
// traffic class (RFC 3168 §5).
const (
	ecnNotECT = 0b00
	ecnECT1   = 0b01
	ecnECT0   = 0b10
	ecnCE     = 0b11
)

// markCE sets the Congestion Experienced codepoint on p when its sender
// declared it ECN-capable, so that an AQM can signal congestion without
// losing the packet (RFC 3168 §5). It reports whether the packet now
// carries CE:
//
//   - ECT(0) or ECT(1): set to CE, true;
//   - CE already: left alone, true (the congestion is already signalled, and
//     an AQM should forward rather than drop it, as Linux's INET_ECN_set_ce);
//   - Not-ECT, not IPv4 or IPv6, or a header too short to hold the field:
//     false, and p is not touched. The caller then drops.
//
// For IPv4 the header checksum is updated incrementally (RFC 1624 eqn. 3),
// so a packet whose checksum was right stays right and one whose checksum
// was wrong stays wrong by the same amount: markCE never repairs or hides
// corruption an earlier stage introduced. IPv6 has no header checksum, and
// the traffic class is covered by no upper-layer checksum's pseudo-header.
//
// markCE does not allocate.
func markCE(p *Packet) bool {
	b := p.Data
	if len(b) == 0 {
		return false
	}
	switch b[0] >> 4 {
	case 4:
		ihl := int(b[0]&0x0f) * 4
		if len(b) < 20 || ihl < 20 || ihl > len(b) {
			return false
		}
		switch b[1] & 0b11 {
		case ecnNotECT:
			return false
		case ecnCE:
			return true
		}
		// The TOS byte is the low half of the header's first 16-bit word.
		old := binary.BigEndian.Uint16(b[0:2])
		b[1] |= ecnCE
		sum := binary.BigEndian.Uint16(b[10:12])
		binary.BigEndian.PutUint16(b[10:12], csumReplace16(sum, old, binary.BigEndian.Uint16(b[0:2])))
		return true
	case 6:
		if len(b) < 40 {
			return false
		}
		// The traffic class straddles bytes 0 and 1; its ECN field is
		// bits 5-4 of byte 1.
		switch (b[1] >> 4) & 0b11 {
		case ecnNotECT:
			return false
		case ecnCE:
			return true
		}
		b[1] |= ecnCE << 4
		return true
	}
	return false
}

// csumReplace16 returns the Internet checksum hc updated for one 16-bit
// word of the covered data changing from m to m2, by RFC 1624 eqn. 3:
//
//	HC' = ~(~HC + ~m + m')
//
// Unlike eqn. 2 of RFC 1141 it never yields 0xFFFF (-0) where a full
// recomputation yields 0x0000, so the result equals what a receiver
// computing the checksum from scratch gets.
func csumReplace16(hc, m, m2 uint16) uint16 {
	s := uint32(^hc) + uint32(^m) + uint32(m2)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}
