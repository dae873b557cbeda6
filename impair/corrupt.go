package impair

import (
	"encoding/binary"
	"math/rand/v2"
	"time"
)

// corruptStage is netem's "corrupt P [CORR]": with the chance it flips one
// random bit of the packet's IP payload, counting it in
// Counters.Corrupted.
//
// netem flips a bit anywhere in the frame, headers included. Here only the
// IP payload is touched (transport header and data, after the IPv4 header
// and its options, or after IPv6's fixed 40-byte header, extension headers
// being payload), because a corrupted IP header mostly turns into a
// misrouted or silently discarded packet rather than the damaged segment
// the impairment is meant to deliver. Checksums are deliberately left
// stale, as on a real link: the receiver's transport checksum is what
// catches the damage. A packet with no payload, or that is not IPv4 or
// IPv6, goes through untouched and uncounted even when the chance says
// corrupt.
type corruptStage struct {
	passive
	chance chance
	rng    *rand.Rand
}

// newCorruptStage returns the corrupt stage of c drawing from rng.
func newCorruptStage(c Chance, rng *rand.Rand) Stage {
	return &corruptStage{chance: newChance(c, rng), rng: rng}
}

func (*corruptStage) Name() string { return "corrupt" }

func (s *corruptStage) Push(now time.Time, p *Packet, out Sink) {
	s.c.in(p)
	if s.chance.next() {
		// The checksum must be final before the bit flips, or the
		// receiver's device would compute it over the damage.
		p.FinishChecksum()
		if b := ipPayload(p.Data); len(b) > 0 {
			bit := s.rng.IntN(len(b) * 8)
			b[bit>>3] ^= 1 << (bit & 7)
			s.c.Corrupted.Add(1)
		}
	}
	s.forward(now, p, out)
}

// ipPayload returns the part of the IP packet pkt after its IP header, up
// to the end the header's length field gives (bytes past it are padding
// the receiver never reads). It returns nil for anything that is not a
// well-formed IPv4 or IPv6 header; it never panics.
func ipPayload(pkt []byte) []byte {
	if len(pkt) == 0 {
		return nil
	}
	var hdr, end int
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return nil
		}
		hdr = int(pkt[0]&0x0f) * 4 // IHL, options included
		end = int(binary.BigEndian.Uint16(pkt[2:4]))
		if hdr < 20 || hdr > len(pkt) {
			return nil
		}
	case 6:
		if len(pkt) < 40 {
			return nil
		}
		hdr = 40
		end = hdr + int(binary.BigEndian.Uint16(pkt[4:6]))
	default:
		return nil
	}
	// Trust the length field only to shorten: a larger one is a truncated
	// packet, and we corrupt what is there.
	if end < hdr || end > len(pkt) {
		end = len(pkt)
	}
	return pkt[hdr:end]
}
