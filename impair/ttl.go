package impair

import "encoding/binary"

// DecrementTTL lowers the TTL of an IPv4 packet, or the hop limit of an
// IPv6 one, by one, as a router forwarding it does, and updates the IPv4
// header checksum incrementally (RFC 1624, as markCE does: a wrong
// checksum stays wrong). It reports false, leaving b as it is, when the
// packet would expire here (a TTL of 1 or 0: a router sends ICMP "time
// exceeded" instead, RFC 1812 §5.3.1) or b is not IPv4 or IPv6 with a
// whole header. It does not allocate.
func DecrementTTL(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 || b[8] <= 1 {
			return false
		}
		// TTL is the high byte of the header's fifth 16-bit word.
		old := binary.BigEndian.Uint16(b[8:10])
		b[8]--
		sum := binary.BigEndian.Uint16(b[10:12])
		binary.BigEndian.PutUint16(b[10:12], csumReplace16(sum, old, binary.BigEndian.Uint16(b[8:10])))
		return true
	case 6:
		if len(b) < 40 || b[7] <= 1 {
			return false
		}
		b[7]--
		return true
	}
	return false
}

// SegmentSize returns the size of the largest packet p stands for on the
// wire: a GSO packet's headers and MSS, else its length.
func (p *Packet) SegmentSize() int {
	if p.segs == 0 {
		return len(p.Data)
	}
	return int(p.hdrLen) + int(p.mss)
}
